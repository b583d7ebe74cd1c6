"""Pooled vectors out of llama.cpp (part of the llama-cpp-python boundary with llama_handle.py): from an
embedding model's own context, or from a small context of their own beside a chat model's.

A chat model embeds in a second llama_context over the same weights, not in its chat context with
llama_set_embeddings toggled: the chat context's pooling type is fixed when it is made (none), its KV cells
and sequence ids belong to the replies, parked chats and pinned prompts the backend keeps books of
(kv_sequences.py), and a reply's batch may run between two embedding batches. The second context costs its
own KV cache and compute buffer (those of one n_batch-token ubatch, about the chat's own), made at the first
embedding request and freed with the model; it runs without flash attention, so that a vector does not
depend on the other inputs batched with it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

import llama_cpp

from engine.gguf.llama_batch import Batch, BatchRow
from engine.gguf.llama_handle import LlamaError, LlamaHandle
from models.formats.embedding_models import EMBED_BATCH_INPUTS

# Inputs one batch holds at most: the n_seq_max of an embedding context (the plan's forecast counts on it).
EMBED_SEQUENCES = EMBED_BATCH_INPUTS
POOLING_UNSPECIFIED = llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED


class LlamaEmbedder:
    """Evaluates batches of inputs, each its own sequence, and reads each one's pooled vector.

    Over the context of `handle` (a model loaded for embeddings: LlamaSettings.embeddings), or over `context`,
    one of its own that it frees (made by `beside`).
    """

    def __init__(self, handle: LlamaHandle, context: llama_cpp.llama_context_p | None = None):
        self._owned = context
        self._ctx = context if context is not None else handle.context_pointer
        self._memory = llama_cpp.llama_get_memory(self._ctx)  # None for an encoder: it keeps no KV cache
        self.n_ubatch = int(llama_cpp.llama_n_ubatch(self._ctx))
        self.n_seq = int(llama_cpp.llama_n_seq_max(self._ctx))
        self.pooling = int(llama_cpp.llama_pooling_type(self._ctx))
        self.n_embd = int(llama_cpp.llama_model_n_embd_out(handle.model_pointer))
        self._batch = Batch(self.n_ubatch)

    @classmethod
    def beside(cls, handle: LlamaHandle, n_ctx: int, pooling: int) -> LlamaEmbedder:
        """A context of its own over `handle`'s model, for inputs of up to `n_ctx` tokens together, pooled as
        `pooling` says; LlamaError if llama.cpp cannot make it (no memory for it)."""
        chat = handle.context_params
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx
        params.n_seq_max = EMBED_SEQUENCES
        params.kv_unified = True
        params.n_threads, params.n_threads_batch = chat.n_threads, chat.n_threads_batch or os.cpu_count() or 1
        params.embeddings, params.pooling_type = True, pooling
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.type_k, params.type_v = chat.type_k, chat.type_v
        params.no_perf = False
        context = llama_cpp.llama_init_from_model(handle.model_pointer, params)
        if not context:
            raise LlamaError("llama.cpp could not create a context for embeddings")
        try:
            return cls(handle, context)
        except BaseException:
            llama_cpp.llama_free(context)
            raise

    def run(self, inputs: Sequence[Sequence[int]]) -> list[bytes]:
        """One llama_decode of `inputs` (at most n_seq of them, n_ubatch tokens together): each one's pooled
        vector, n_embd float32 in the machine's byte order. LlamaError where llama.cpp fails the batch."""
        if not 0 < len(inputs) <= self.n_seq:
            raise ValueError(f"a batch holds 1 to {self.n_seq} inputs, not {len(inputs)}")
        rows = [BatchRow(token, pos, seq, True) for seq, tokens in enumerate(inputs) for pos, token in enumerate(tokens)]
        self._batch.fill_rows(rows)  # ValueError past n_ubatch tokens: an encoder would abort the process
        self._clear()
        try:
            code = int(llama_cpp.llama_decode(self._ctx, self._batch.batch))
            if code != 0:
                raise LlamaError(f"llama.cpp could not embed a batch of {len(rows)} tokens (llama_decode: {code})")
            vectors = []
            for seq in range(len(inputs)):
                pooled = llama_cpp.llama_get_embeddings_seq(self._ctx, seq)
                if not pooled:
                    raise LlamaError(f"llama.cpp pooled no vector for sequence {seq}")
                vectors.append(ctypes.string_at(pooled, self.n_embd * 4))
            return vectors
        finally:
            self._clear()  # every cell free again for the next batch (a chat model's own context is untouched)

    def _clear(self) -> None:
        if self._memory:
            llama_cpp.llama_memory_clear(self._memory, True)

    def set_threads(self, threads: int, threads_batch: int) -> None:
        if self._owned is not None:
            llama_cpp.llama_set_n_threads(self._ctx, threads, threads_batch)

    def close(self) -> None:
        """Free the batch, and the context where it is this embedder's own."""
        self._batch.close()
        if self._owned is not None:
            llama_cpp.llama_free(self._owned)
            self._owned = None

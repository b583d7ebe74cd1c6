"""Sequences in llama.cpp's KV cache: the live one (sequence 0) and parked ones (1 … n-1).

The context is created with several sequence ids over one unified KV cache. Sequence 0 is
the one being generated. A sequence is *parked* by `llama_memory_seq_cp`, which adds another
sequence id to the same cells, so nothing is copied; a prompt that shares a prefix with a
parked sequence gets those cells back the same way. Pinned sequences (a preset's system
prompt, prefilled at load) are parked so; prefix_reuse.py says why other chats are not.

All sequences share the context's `n_ctx` cells. llama.cpp has no call that counts the cells
in use across sequences, so this class keeps its own ledger: every cell is an integer id,
a sequence is the list of its cells, and `seq_cp` copies ids. What llama.cpp frees when a
sequence is removed is exactly what no other list still holds.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp
from llama_cpp import _internals

from engine.gguf.prefix_cache import common_prefix_len

log = logging.getLogger(__name__)

LIVE = 0


class KvCacheFull(RuntimeError):
    """llama.cpp found no free cells for a batch, even with every parked sequence evicted."""


@dataclass(slots=True, eq=False)
class ParkedSequence:
    seq_id: int
    tokens: tuple[int, ...]
    cells: list[int]
    pinned: bool = False


class KvSequences:
    """The live sequence and the parked ones of one llama.cpp context.

    Args:
        llm: the loaded model; its `input_ids`/`n_tokens` describe sequence 0.
        n_seq: sequence ids the context was created with; 1 disables parking.
    """

    def __init__(self, llm: llama_cpp.Llama, n_seq: int):
        self._llm = llm
        self._mem = llama_cpp.llama_get_memory(llm._ctx.ctx)
        self._free_ids = list(range(n_seq - 1, 0, -1))
        self._parked: list[ParkedSequence] = []  # least recently used first
        self._live_cells: list[int] = []
        self._ids = itertools.count()

    # ------------------------------------------------------------ what is there

    @property
    def live_tokens(self) -> tuple[int, ...]:
        return tuple(self._llm.input_ids[: self._llm.n_tokens].tolist())

    @property
    def parked(self) -> tuple[ParkedSequence, ...]:
        return tuple(self._parked)

    def used_cells(self) -> int:
        """Cells holding a token of any sequence, shared cells counted once."""
        used = set(self._live_cells)
        for parked in self._parked:
            used.update(parked.cells)
        return len(used)

    def lookup(self, tokens: Sequence[int]) -> tuple[ParkedSequence | None, int]:
        """The parked sequence sharing the longest prefix with `tokens`, and that length."""
        best, best_len = None, 0
        for parked in self._parked:
            n = common_prefix_len(parked.tokens, tokens)
            if n > best_len:
                best, best_len = parked, n
        return best, best_len

    # ------------------------------------------------------------ the live sequence

    def trim_live(self, n: int) -> bool:
        """Keep the first `n` tokens of sequence 0; False where the model cannot (recurrent)."""
        if n >= self._llm.n_tokens:
            return True
        if not llama_cpp.llama_memory_seq_rm(self._mem, LIVE, n, -1):
            return False
        self._llm.n_tokens = n
        del self._live_cells[n:]
        return True

    def clear_live(self) -> None:
        llama_cpp.llama_memory_seq_rm(self._mem, LIVE, -1, -1)
        self._llm.n_tokens = 0
        self._live_cells.clear()

    def live_restored(self, tokens: Sequence[int]) -> None:
        """Sequence 0 was just filled from a saved state holding `tokens` (in new cells)."""
        llm = self._llm
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        self._live_cells = [next(self._ids) for _ in tokens]

    def decode(self, tokens: Sequence[int], on_full) -> None:
        """Append `tokens` to sequence 0 in batches; logits of the last one are kept.

        `on_full()` is called when llama.cpp finds no free cells; it frees some (or raises)
        and the batch is tried again.
        """
        llm = self._llm
        llama_cpp.llama_memory_seq_rm(self._mem, LIVE, llm.n_tokens, -1)
        for i in range(0, len(tokens), llm.n_batch):
            batch = list(tokens[i : i + llm.n_batch])
            n_past = llm.n_tokens
            # set_batch puts every token in sequence 0 with logits for the last one only.
            llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)
            while True:
                code = llama_cpp.llama_decode(llm._ctx.ctx, llm._batch.batch)
                if code == 0:
                    break
                if code != 1:  # 1: no KV slot for the batch; anything else is an error
                    raise RuntimeError(f"llama_decode returned {code}")
                on_full()
            llm.input_ids[n_past : n_past + len(batch)] = batch
            llm.n_tokens += len(batch)
            self._live_cells.extend(next(self._ids) for _ in batch)

    # ------------------------------------------------------------ parking

    def park_live(self, pinned: bool = False) -> ParkedSequence | None:
        """Give sequence 0's cells another sequence id; None when no id is free (evict first)."""
        live = self.live_tokens
        if not live or not self._free_ids:
            return None
        for parked in self._parked:
            if parked.tokens == live:  # already parked: just mark it used
                parked.pinned = parked.pinned or pinned
                self._touch(parked)
                return parked
        seq_id = self._free_ids.pop()
        llama_cpp.llama_memory_seq_cp(self._mem, LIVE, seq_id, -1, -1)
        parked = ParkedSequence(seq_id, live, list(self._live_cells), pinned)
        self._parked.append(parked)
        return parked

    def resume(self, parked: ParkedSequence, n: int) -> None:
        """Make the first `n` tokens of `parked` the live sequence, sharing its cells (it stays parked)."""
        llama_cpp.llama_memory_seq_rm(self._mem, LIVE, -1, -1)
        llama_cpp.llama_memory_seq_cp(self._mem, parked.seq_id, LIVE, 0, n)
        llm = self._llm
        llm.input_ids[:n] = parked.tokens[:n]
        llm.n_tokens = n
        self._live_cells = parked.cells[:n]
        self._touch(parked)

    def eviction_candidate(self) -> ParkedSequence | None:
        """The parked sequence to evict next: the least recently used, pinned ones last."""
        for parked in self._parked:
            if not parked.pinned:
                return parked
        return self._parked[0] if self._parked else None

    def evict(self, parked: ParkedSequence) -> None:
        llama_cpp.llama_memory_seq_rm(self._mem, parked.seq_id, -1, -1)
        self._parked.remove(parked)
        self._free_ids.append(parked.seq_id)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)
        self._llm.n_tokens = 0
        self._live_cells.clear()
        for parked in list(self._parked):
            self._parked.remove(parked)
            self._free_ids.append(parked.seq_id)

    def _touch(self, parked: ParkedSequence) -> None:
        self._parked.remove(parked)
        self._parked.append(parked)


def open_parking_context(llm: llama_cpp.Llama, n_seq: int, forget_context_buffers) -> int:
    """Recreate `llm`'s context with `n_seq` sequence ids over one unified KV cache.

    `llama_cpp.Llama` creates its context with a single sequence id and offers no way to ask
    for more, so the context is replaced right after loading (the old one is freed first, so
    the KV cache is never allocated twice). Models whose cells cannot be shared or trimmed
    freely keep one sequence: recurrent and hybrid models hold one state per sequence, and a
    sliding-window cache drops old cells. Returns the number of sequence ids in use.
    """
    model = llm._model.model
    if (
        n_seq <= 1
        or llama_cpp.llama_model_is_recurrent(model)
        or llama_cpp.llama_model_is_hybrid(model)
        or llama_cpp.llama_model_n_swa(model) > 0
    ):
        return 1
    params = llm.context_params
    llm._ctx.close()
    forget_context_buffers()  # llama.cpp logs the new context's buffer sizes again
    for tried in (n_seq, 1):
        params.n_seq_max = tried
        params.kv_unified = tried > 1
        try:
            ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        except ValueError:
            log.warning("llama.cpp could not create a context with %d sequences", tried)
            forget_context_buffers()
            continue
        llm._ctx = llm._stack.enter_context(contextlib.closing(ctx))
        return tried
    raise RuntimeError("llama.cpp could not create a context for the model")

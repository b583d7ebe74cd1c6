"""A draft model for speculative decoding: a smaller GGUF of the same vocabulary guesses the next
few tokens, the loaded model verifies them in one batch (backend.py).

The draft keeps its own KV cache of the conversation (one sequence): each step it catches up with
the tokens accepted since the last one (the common prefix stays), then guesses greedily. Only a
draft that tokenizes exactly as the model does can help: every token's text is compared at load,
and the first difference is named. A draft that is not smaller than the model would only slow
replies down, and is refused too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.backend import BackendError
from engine.gguf.file_check import InvalidModelFile, check_gguf_path
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from engine.gguf.llama_sampler import Sampler
from engine.gguf.prefix_cache import common_prefix_len
from models.formats.embedding_models import is_embedding_model
from models.formats.errors import InvalidModelFile as HeaderError
from models.formats.gguf_header import read_gguf_header
from models.plan.load_options import MAX_VOCAB_SIZE_DIFFERENCE


def vocabulary_difference(model: LlamaHandle, draft: LlamaHandle) -> str | None:
    """How the draft's vocabulary differs from the model's (the first token that does); None when they
    hold the same tokens, the longer one at most MAX_VOCAB_SIZE_DIFFERENCE more."""
    if abs(draft.n_vocab - model.n_vocab) > MAX_VOCAB_SIZE_DIFFERENCE:
        return (f"it has {draft.n_vocab:,} tokens, the model {model.n_vocab:,} (at most {MAX_VOCAB_SIZE_DIFFERENCE} "
                "apart, for padding)")
    for token in range(min(model.n_vocab, draft.n_vocab)):
        ours, theirs = model.detokenize([token], special=True), draft.detokenize([token], special=True)
        if ours != theirs:
            return f"token {token} is {theirs!r} there and {ours!r} in the model"
    if (draft.bos, draft.eos) != (model.bos, model.eos):
        return f"its BOS/EOS tokens are {draft.bos}/{draft.eos}, the model's {model.bos}/{model.eos}"
    return None


class DraftModel:
    """A loaded draft model and what its KV cache holds.

    Args:
        path: the draft's GGUF file.
        model: the loaded model it drafts for.
        settings: the draft's llama.cpp settings (its context as long as the model's).

    Raises:
        BackendError: "invalid_model" for a file llama.cpp cannot load, another vocabulary, or a draft
            that is not smaller than the model.
    """

    def __init__(self, path: Path, model: LlamaHandle, settings: LlamaSettings):
        try:
            check_gguf_path(path)
            metadata = read_gguf_header(path).metadata
        except (InvalidModelFile, HeaderError) as exc:
            raise BackendError("invalid_model", f"The draft model: {exc}") from None
        if is_embedding_model(metadata):  # llama.cpp aborts the process when one is asked to decode a draft
            raise BackendError("invalid_model", f"The draft model {path.name} cannot draft: it is an embedding model "
                               "(it makes vectors, not text).")
        try:
            self.llama = LlamaHandle(path, settings, lambda: None)
        except (ValueError, RuntimeError, OSError) as exc:
            raise BackendError("invalid_model", f"The draft model {path.name}: llama.cpp could not load it ({exc})") \
                from None
        problem = vocabulary_difference(model, self.llama)
        if problem is None and self.llama.n_params >= model.n_params:
            problem = (f"it is not smaller than the model ({self.llama.n_params:,} parameters against "
                       f"{model.n_params:,}): drafting with it would slow replies down")
        if problem is not None:
            self.llama.close()
            raise BackendError("invalid_model", f"The draft model {path.name} cannot draft for this model: {problem}.")
        self.path = path
        self._model_vocab = model.n_vocab  # drafts at or past it are padding the model cannot take
        self._sampler = Sampler([("greedy",)])
        self._tokens: list[int] = []  # what sequence 0 of the draft's KV cache holds

    def draft(self, context: Sequence[int], limit: int) -> list[int]:
        """Up to `limit` tokens the draft expects after `context` (the conversation so far), greedily."""
        if limit <= 0 or not context:
            return []
        llama = self.llama
        keep = min(common_prefix_len(self._tokens, context), len(context) - 1)  # the last one gives the logits
        if any(t >= llama.n_vocab for t in context[keep:]):  # a token of the model's the draft does not have
            return []
        llama.seq_rm(0, keep, -1)
        del self._tokens[keep:]
        for start in range(keep, len(context), llama.n_batch):
            self._decode(context[start : start + llama.n_batch])
        out: list[int] = []
        while True:
            token = self._sampler.sample(llama)
            if llama.is_end_of_generation(token) or token >= self._model_vocab:
                return out
            out.append(token)
            if len(out) == limit or len(self._tokens) + 1 >= llama.n_ctx:
                return out
            self._decode([token])

    def _decode(self, tokens: Sequence[int]) -> None:
        if self.llama.decode(tokens, len(self._tokens)) != 0:
            raise BackendError("internal", "The draft model's context is full.")
        self._tokens.extend(tokens)

    def forget(self) -> None:
        """Its cache no longer matches anything (the model was reloaded)."""
        self.llama.seq_rm(0, -1, -1)
        self._tokens.clear()

    def close(self) -> None:
        self._sampler.close()
        self.llama.close()

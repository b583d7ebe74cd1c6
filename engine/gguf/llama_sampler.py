"""A llama.cpp sampler chain (part of the llama-cpp-python boundary with llama_handle.py: only the
`llama_*` files import llama_cpp)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import llama_cpp

if TYPE_CHECKING:
    from engine.gguf.llama_handle import LlamaHandle


# The samplers a chain can hold, by the name sampling.py gives each step.
_SAMPLERS = {
    "greedy": llama_cpp.llama_sampler_init_greedy, "top_k": llama_cpp.llama_sampler_init_top_k,
    "top_p": llama_cpp.llama_sampler_init_top_p, "min_p": llama_cpp.llama_sampler_init_min_p,
    "temp": llama_cpp.llama_sampler_init_temp, "dist": llama_cpp.llama_sampler_init_dist,
}


class GrammarRefused(ValueError):
    """llama.cpp could not parse a grammar (its own log says where)."""


def _grammar(vocab: llama_cpp.llama_vocab_p, text: str) -> llama_cpp.llama_sampler_p:
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        raise GrammarRefused("llama.cpp could not parse the grammar")
    return sampler


class Sampler:
    """A llama.cpp sampler chain of `steps`, (name, *arguments) run in order; close() frees it.

    `grammar` (GBNF, its root rule "root") goes first, over the model's `vocab`: every later step
    chooses among the tokens it allows, and each sampled token advances it. GrammarRefused when
    llama.cpp cannot parse it.
    """

    def __init__(self, steps: Sequence[tuple], grammar: str | None = None,
                 vocab: llama_cpp.llama_vocab_p | None = None):
        self._chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        try:
            if grammar is not None:
                llama_cpp.llama_sampler_chain_add(self._chain, _grammar(vocab, grammar))
            for name, *args in steps:  # a name not in _SAMPLERS: KeyError
                llama_cpp.llama_sampler_chain_add(self._chain, _SAMPLERS[name](*args))  # the chain owns it
        except BaseException:
            self.close()
            raise

    def sample(self, llama: LlamaHandle, row: int = -1) -> int:
        """The next token, from the logits of the last batch's `row`-th token (-1: its last)."""
        return llama_cpp.llama_sampler_sample(self._chain, llama.context_pointer, row)

    def close(self) -> None:
        if self._chain:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None

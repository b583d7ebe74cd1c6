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


class Sampler:
    """A llama.cpp sampler chain of `steps`, (name, *arguments) run in order; close() frees it."""

    def __init__(self, steps: Sequence[tuple]):
        self._chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        for name, *args in steps:  # a name not in _SAMPLERS: KeyError
            llama_cpp.llama_sampler_chain_add(self._chain, _SAMPLERS[name](*args))  # the chain owns it

    def sample(self, llama: LlamaHandle, row: int = -1) -> int:
        """The next token, from the logits of the last batch's `row`-th token (-1: its last)."""
        return llama_cpp.llama_sampler_sample(self._chain, llama.context_pointer, row)

    def close(self) -> None:
        if self._chain:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None

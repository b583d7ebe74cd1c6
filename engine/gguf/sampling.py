"""The sampler chain for one reply, built on llama.cpp's own samplers."""

from __future__ import annotations

import llama_cpp
from llama_cpp import _internals

from engine.protocol import SamplingParams

# Drops tokens far less likely than the best one: llama.cpp's default, and what keeps
# a small model from wandering at higher temperatures.
MIN_P = 0.05


def make_sampler(params: SamplingParams) -> _internals.LlamaSampler:
    """Greedy at temperature 0; otherwise top-k, top-p, min-p, temperature, then a seeded draw."""
    sampler = _internals.LlamaSampler()
    if params.temperature <= 0:
        sampler.add_greedy()
        return sampler
    if params.top_k > 0:
        sampler.add_top_k(params.top_k)
    sampler.add_top_p(params.top_p, 1)
    sampler.add_min_p(MIN_P, 1)
    sampler.add_temp(params.temperature)
    sampler.add_dist(params.seed if params.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED)
    return sampler

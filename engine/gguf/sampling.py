"""The sampler chain for one reply, built on llama.cpp's own samplers."""

from __future__ import annotations

from engine.gguf.llama_handle import DEFAULT_SEED
from engine.gguf.llama_sampler import Sampler
from engine.protocol import SamplingParams

# Drops tokens far less likely than the best one: llama.cpp's default, and what keeps
# a small model from wandering at higher temperatures.
MIN_P = 0.05


def make_sampler(params: SamplingParams, grammar: str | None = None, vocab: object = None) -> Sampler:
    """Greedy at temperature 0; otherwise top-k, top-p, min-p, temperature, then a seeded draw; a
    `grammar` (over the model's `vocab`) before them all."""
    if params.temperature <= 0:
        return Sampler([("greedy",)], grammar, vocab)
    steps = [("top_k", params.top_k)] if params.top_k > 0 else []
    steps += [("top_p", params.top_p, 1), ("min_p", MIN_P, 1), ("temp", params.temperature),
              ("dist", params.seed if params.seed is not None else DEFAULT_SEED)]
    return Sampler(steps, grammar, vocab)

"""Next-token choice per request: greedy, or temperature with top-k and top-p, seeded per request.

A seeded request draws from a generator seeded by (seed, position), so its tokens do not
depend on what else is in the batch or on preemption; unseeded requests share the sampler's
own generator.
"""

from __future__ import annotations

import random
from typing import Protocol

import torch


class SamplingLike(Protocol):
    temperature: float
    top_p: float
    top_k: int
    seed: int | None


def filtered_probs(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """The distribution sampled from for one row of logits [vocab] (temperature > 0)."""
    scaled = logits.float() / temperature
    if 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        # Drop a token when the ones before it already reach top_p; the first always stays.
        drop = (torch.cumsum(sorted_probs, dim=-1) - sorted_probs) >= top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        probs = probs / probs.sum()
    return probs


def step_generator(seed: int, position: int, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed((seed * 1_000_003 + position) & 0x7FFF_FFFF_FFFF_FFFF)
    return generator


class Sampler:
    def __init__(self, device: torch.device, seed: int | None = None):
        self.device = device
        self._generator = torch.Generator(device=device)
        self._generator.manual_seed(random.SystemRandom().getrandbits(63) if seed is None else seed)

    def generator(self, options: SamplingLike, position: int) -> torch.Generator:
        """The generator for the token at `position` of a request."""
        if options.seed is None:
            return self._generator
        return step_generator(options.seed, position, self.device)

    def sample(self, logits: torch.Tensor, options: list[SamplingLike], positions: list[int]) -> list[int]:
        """One token per row of `logits` [N, vocab]; positions[i] is where row i's token will sit."""
        greedy = logits.argmax(dim=-1).tolist()
        out: list[int] = []
        for i, opt in enumerate(options):
            if opt.temperature <= 0.0:
                out.append(greedy[i])
                continue
            probs = filtered_probs(logits[i], opt.temperature, opt.top_k, opt.top_p)
            token = torch.multinomial(probs, 1, generator=self.generator(opt, positions[i]))
            out.append(int(token))
        return out

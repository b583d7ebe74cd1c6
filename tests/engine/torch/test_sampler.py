"""The sampler: greedy, temperature, top-k, top-p, and per-request seeds independent of the batch."""

from __future__ import annotations

import torch

from engine.torch.sampler import Sampler, filtered_probs
from engine.torch.sequence import SamplingOptions

CPU = torch.device("cpu")
LOGITS = torch.tensor([[1.0, 3.0, 2.0, 0.5, -1.0], [0.0, 0.1, 0.2, 5.0, 0.3]])


def test_greedy_takes_the_argmax() -> None:
    greedy = SamplingOptions()
    assert Sampler(CPU).sample(LOGITS, [greedy, greedy], [0, 0]) == [1, 3]


def test_top_k_one_is_greedy_at_any_temperature() -> None:
    options = SamplingOptions(temperature=5.0, top_k=1)
    assert {Sampler(CPU).sample(LOGITS[:1], [options], [i])[0] for i in range(50)} == {1}


def test_top_k_keeps_the_k_most_likely() -> None:
    probs = filtered_probs(LOGITS[0], 1.0, 2, 1.0)
    assert probs.nonzero().flatten().tolist() == [1, 2]
    assert torch.isclose(probs.sum(), torch.tensor(1.0))


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    full = torch.softmax(LOGITS[0], -1)  # sorted: 1 (0.63), 2 (0.23), 0 (0.09), ...
    assert filtered_probs(LOGITS[0], 1.0, 0, 0.5).nonzero().flatten().tolist() == [1]
    kept = filtered_probs(LOGITS[0], 1.0, 0, 0.8).nonzero().flatten().tolist()
    assert kept == [1, 2] and float(full[1] + full[2]) >= 0.8


def test_temperature_sharpens_and_flattens() -> None:
    cold, hot = filtered_probs(LOGITS[0], 0.2, 0, 1.0), filtered_probs(LOGITS[0], 5.0, 0, 1.0)
    assert cold.max() > torch.softmax(LOGITS[0], -1).max() > hot.max()


def test_samples_follow_the_distribution() -> None:
    sampler = Sampler(CPU, seed=0)
    options = SamplingOptions(temperature=1.0)
    counts = torch.bincount(torch.tensor([sampler.sample(LOGITS[:1], [options], [0])[0] for _ in range(3000)]), minlength=5)
    assert torch.allclose(counts / 3000, torch.softmax(LOGITS[0], -1), atol=0.04)


def test_a_seeded_request_draws_the_same_tokens_whatever_else_is_in_the_batch() -> None:
    seeded = SamplingOptions(temperature=1.0, seed=42)
    other = SamplingOptions(temperature=1.0)
    alone = [Sampler(CPU).sample(LOGITS[:1], [seeded], [p])[0] for p in range(20)]
    # LOGITS.flip(0) puts the same row second, beside an unseeded neighbour.
    batched = [Sampler(CPU).sample(LOGITS.flip(0), [other, seeded], [p, p])[1] for p in range(20)]
    assert batched == alone
    assert len(set(alone)) > 1  # it does sample


def test_different_seeds_differ() -> None:
    a = [Sampler(CPU).sample(LOGITS[:1], [SamplingOptions(temperature=2.0, seed=1)], [p])[0] for p in range(30)]
    b = [Sampler(CPU).sample(LOGITS[:1], [SamplingOptions(temperature=2.0, seed=2)], [p])[0] for p in range(30)]
    assert a != b

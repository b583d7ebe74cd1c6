"""Speculative decoding: greedy output identical to plain greedy, acceptance > 0, rejection sampling
keeps the target's distribution."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.torch.arch import load_model
from engine.torch.config import EngineConfig
from engine.torch.llm_engine import LLMEngine
from engine.torch.model_runner import ModelRunner
from engine.torch.sampler import Sampler
from engine.torch.scheduler import ScheduledChunk
from engine.torch.sequence import SamplingOptions, Sequence
from engine.torch.speculative import DraftModelDrafter, PromptLookupDrafter, SpeculativeRunner, lookup
from tests.engine.torch.reference import kv_for
from tests.fixtures.tiny_hf import write_first_layer_copy, write_tiny_model

K = 4


def test_prompt_lookup_copies_what_followed_the_latest_match() -> None:
    tokens = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert lookup(tokens, 3) == [7, 8, 5]  # the latest earlier "1 2 3" is followed by 7 8 5
    assert lookup([5, 6, 7], 3) == []
    assert lookup(tokens, 0) == []


@pytest.fixture(scope="module")
def target_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("target")
    write_tiny_model(directory, "llama", tokenizer=False, num_hidden_layers=3)
    return directory


@pytest.fixture(scope="module")
def draft_dir(target_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A same-family draft: the target's embeddings, first layer and head."""
    return write_first_layer_copy(target_dir, tmp_path_factory.mktemp("draft"))


def prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(3)
    base = [torch.randint(3, 320, (n,), generator=g).tolist() for n in (12, 30, 7, 20)]
    # Repetitive prompts, like a text to rewrite: the reply tends to copy from them.
    return [p * 3 for p in base]


def engine(model, num_speculative: int, drafter=None, blocks: int = 64):
    config = EngineConfig(num_kv_blocks=blocks, block_size=16, max_num_seqs=4, max_num_batched_tokens=64,
                          max_model_len=256, num_speculative_tokens=num_speculative)
    runner = ModelRunner(model, kv_for(model, blocks), config)
    if num_speculative == 0:
        return LLMEngine(config, runner), runner
    drafter = drafter(config) if callable(drafter) else drafter
    spec = SpeculativeRunner(runner, drafter)
    return LLMEngine(config, spec), spec


GREEDY = SamplingOptions(max_tokens=40, ignore_eos=True)


def test_prompt_lookup_greedy_is_plain_greedy_token_for_token(target_dir: Path) -> None:
    model = load_model(target_dir).model
    plain, _ = engine(model, 0)
    expected = plain.generate(prompts(), GREEDY)
    spec_engine, spec = engine(model, K, PromptLookupDrafter())
    assert spec_engine.generate(prompts(), GREEDY) == expected
    assert spec.proposed > 0 and spec.acceptance_rate > 0


def test_draft_model_greedy_is_plain_greedy_with_accepted_drafts(target_dir: Path, draft_dir: Path) -> None:
    model = load_model(target_dir).model
    draft = load_model(draft_dir).model
    plain, _ = engine(model, 0)
    expected = plain.generate(prompts(), GREEDY)
    spec_engine, spec = engine(model, K, lambda config: DraftModelDrafter(draft, config, 64, 16))
    assert spec_engine.generate(prompts(), GREEDY) == expected
    assert spec.acceptance_rate > 0


def test_seeded_speculative_sampling_is_reproducible(target_dir: Path, draft_dir: Path) -> None:
    model = load_model(target_dir).model
    draft = load_model(draft_dir).model
    options = SamplingOptions(temperature=0.8, top_p=0.95, max_tokens=24, seed=11, ignore_eos=True)
    runs = []
    for _ in range(2):
        spec_engine, _ = engine(model, K, lambda config: DraftModelDrafter(draft, config, 64, 16))
        runs.append(spec_engine.generate(prompts()[:2], options))
    assert runs[0] == runs[1]


class _Target:
    """What SpeculativeRunner._verify needs of the target runner: its sampler."""

    def __init__(self):
        self.sampler = Sampler(torch.device("cpu"), seed=0)


@pytest.mark.parametrize("with_q", [False, True])
def test_rejection_sampling_keeps_the_target_distribution(with_q: bool) -> None:
    """The first emitted token follows the target's p, whatever the draft proposes."""
    vocab = 5
    p_logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    q = torch.softmax(torch.tensor([0.0, 2.0, 0.0, 1.0, 0.0]), dim=-1)
    rows = p_logits.repeat(3, 1)
    runner = SpeculativeRunner(_Target(), PromptLookupDrafter())  # type: ignore[arg-type]
    counts = torch.zeros(vocab)
    g = torch.Generator().manual_seed(0)
    trials = 4000
    for t in range(trials):
        seq = Sequence(t, [1, 2, 3], SamplingOptions(temperature=1.0, seed=t))
        if with_q:
            drafts = torch.multinomial(q, 2, replacement=True, generator=g).tolist()
            probs = q.repeat(2, 1)
        else:
            drafts, probs = [1, 3], None  # a deterministic (prompt-lookup) draft
        out = runner._verify(ScheduledChunk(seq, 2, 3, 2), rows, drafts, probs)
        counts[out[0]] += 1
    assert torch.allclose(counts / trials, torch.softmax(p_logits, -1), atol=0.03)


def test_speculation_under_a_tight_kv_pool_still_matches_plain_greedy(target_dir: Path) -> None:
    """Draft slots compete for blocks with preempted sequences; the output must not change."""
    model = load_model(target_dir).model
    plain, _ = engine(model, 0)
    expected = plain.generate(prompts(), GREEDY)
    tight, spec = engine(model, K, PromptLookupDrafter(), blocks=12)
    assert tight.generate(prompts(), GREEDY) == expected
    assert tight.scheduler.num_preemptions > 0 and spec.proposed > 0

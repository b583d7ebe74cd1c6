"""The engine loop with a pure-Python runner that keeps its "K/V" in a paged cache (no torch).

The runner writes, for each position p, a value that depends on the token at p and on the value it reads
back for p-1 through the block table; its next token is a hash of every value the sequence reads back.
So a scheduler or block-manager bug that loses, misplaces or shares K/V wrongly changes the output.
"""

from __future__ import annotations

import pytest

from engine.torch.config import EngineConfig
from engine.torch.llm_engine import LLMEngine, StepOutput
from engine.torch.scheduler import ScheduledBatch
from engine.torch.sequence import SamplingOptions, Sequence

VOCAB = 1000
EOS_IDS = (756, 17)  # stop requests 1 and 3 early; request 2 meets 17 too but ignores eos


class PagedHashRunner:
    """A deterministic stand-in for the model runner over a paged KV cache."""

    def __init__(self, config: EngineConfig):
        self.block_size = config.block_size
        self.cache: list[int | None] = [None] * (config.num_kv_blocks * config.block_size)
        self.positions_computed = 0

    def slot(self, seq: Sequence, p: int) -> int:
        block = seq.block_table[p // self.block_size]  # IndexError: no block for this position
        return block * self.block_size + p % self.block_size

    def write(self, seq: Sequence, p: int, token: int) -> None:
        previous = self.cache[self.slot(seq, p - 1)] if p else 0
        assert previous is not None, f"position {p - 1} of sequence {seq.seq_id} was never computed"
        self.cache[self.slot(seq, p)] = hash((token, p, previous))
        self.positions_computed += 1

    def logits_token(self, seq: Sequence, length: int) -> int:
        return hash(tuple(self.cache[self.slot(seq, q)] for q in range(length))) % VOCAB

    def run(self, batch: ScheduledBatch) -> list[int | list[int] | None]:
        out: list[int | list[int] | None] = []
        for chunk in batch.chunks:
            seq = chunk.seq
            for p in range(chunk.start, chunk.end):
                self.write(seq, p, seq.token_ids[p])
            out.append(self.logits_token(seq, chunk.end) if chunk.end == seq.num_tokens else None)
        return out


class SpeculativeHashRunner(PagedHashRunner):
    """Drafts up to k tokens after each decode, writing their K/V in the lookahead slots, and accepts a
    pseudo-random prefix of them plus the target's next token, as speculative decoding does."""

    def __init__(self, config: EngineConfig):
        super().__init__(config)
        self.k = config.num_speculative_tokens
        self.accepted = 0
        self.lookaheads: list[int] = []

    def run(self, batch: ScheduledBatch) -> list[int | list[int] | None]:
        out = super().run(batch)
        for i, chunk in enumerate(batch.chunks):
            seq = chunk.seq
            if chunk.end - chunk.start != 1 or out[i] is None:
                continue
            n, tokens = seq.num_tokens, [out[i]]
            assert chunk.lookahead <= self.k
            assert len(seq.block_table) * self.block_size >= n + chunk.lookahead
            self.lookaheads.append(chunk.lookahead)
            accept = hash((seq.seq_id, n)) % (self.k + 1)
            # The target verifies k drafts in one pass: accepted drafts (the first `accept`, equal to
            # its own greedy tokens) leave good K/V behind; rejected ones leave K/V the engine must
            # never trust, so they are written as garbage.
            for j in range(chunk.lookahead):
                p = n + j
                if j < accept:
                    self.write(seq, p, tokens[-1])
                    tokens.append(self.logits_token(seq, p + 1))
                else:
                    self.cache[self.slot(seq, p)] = hash(("rejected", p))
            self.accepted += len(tokens) - 1
            out[i] = tokens
        return out


PROMPTS = [
    [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 30 + i] + list(range(100 + i, 100 + i + 3 * i))
    for i in range(8)
]


def config(num_kv_blocks: int = 256, **kw) -> EngineConfig:
    base = {"block_size": 4, "max_num_batched_tokens": 16, "max_model_len": 96, "eos_token_ids": EOS_IDS}
    return EngineConfig(num_kv_blocks=num_kv_blocks, **{**base, **kw})


def engine(cfg: EngineConfig, runner_class=PagedHashRunner) -> tuple[LLMEngine, PagedHashRunner]:
    runner = runner_class(cfg)
    return LLMEngine(cfg, runner), runner


def samplings() -> list[SamplingOptions]:
    return [SamplingOptions(max_tokens=10 + 3 * i, ignore_eos=i % 2 == 0) for i in range(8)]


def reference() -> list[list[int]]:
    """Each prompt alone, in its own engine with no prefix cache: the ground truth."""
    outs = []
    for prompt, sampling in zip(PROMPTS, samplings(), strict=True):
        eng, _ = engine(config(enable_prefix_caching=False))
        outs.extend(eng.generate([prompt], sampling))
    return outs


@pytest.mark.parametrize("prefix_caching", [True, False])
@pytest.mark.parametrize("num_kv_blocks", [256, 20], ids=["large-pool", "small-pool"])
def test_eight_concurrent_requests_match_eight_sequential_ones(prefix_caching, num_kv_blocks):
    expected = reference()
    assert any(len(o) < s.max_tokens for o, s in zip(expected, samplings(), strict=True))  # an eos stop
    cfg = config(num_kv_blocks, enable_prefix_caching=prefix_caching)

    eng, runner = engine(cfg)
    assert eng.generate(PROMPTS, samplings()) == expected
    assert eng.block_manager.usage().used == 0
    if num_kv_blocks == 20:  # 80 slots: the longest request needs 65
        assert eng.scheduler.num_preemptions > 0

    sequential, seq_runner = engine(cfg)
    assert [sequential.generate([p], s)[0] for p, s in zip(PROMPTS, samplings(), strict=True)] == expected
    # Every prompt position plus every generated token but the last, less the hits: requests 1-7 find
    # the shared 12-token head (3 blocks) in the cache.
    uncached = sum(len(p) for p in PROMPTS) + sum(len(o) - 1 for o in expected)
    assert seq_runner.positions_computed == uncached - (7 * 12 if prefix_caching else 0)


def test_a_prefix_cache_hit_skips_the_shared_blocks_and_gives_the_same_output():
    eng, runner = engine(config())
    first = eng.generate([PROMPTS[3]])[0]
    before = runner.positions_computed
    rid = eng.add_request(PROMPTS[3])
    outputs = []
    while eng.has_unfinished():
        outputs += eng.step()
    seq = eng.get_sequence(rid)
    assert seq is not None and seq.num_cached_tokens == 20  # 5 of the prompt's 6 full blocks
    assert [o.token_id for o in outputs] == first
    # Only the last prompt block, then one position per generated token but the last, were computed.
    assert runner.positions_computed - before == len(PROMPTS[3]) - 20 + len(first) - 1


def test_step_streams_each_token_once_and_marks_the_last_one_finished():
    eng, _ = engine(config())
    ids = [eng.add_request(p, s) for p, s in zip(PROMPTS[:3], samplings()[:3], strict=True)]
    streamed: dict[int, list[StepOutput]] = {i: [] for i in ids}
    while eng.has_unfinished():
        for out in eng.step():
            streamed[out.seq_id].append(out)
    for rid, expected in zip(ids, reference()[:3], strict=True):
        events = streamed[rid]
        assert [e.token_id for e in events] == expected
        assert [e.finished for e in events] == [False] * (len(events) - 1) + [True]
        assert events[-1].finish_reason in ("stop", "length")
    assert not eng.has_unfinished() and eng.get_sequence(ids[0]) is None


def test_a_too_long_prompt_fails_alone_while_the_others_continue():
    eng, _ = engine(config(max_model_len=40))
    ok = eng.add_request(PROMPTS[0], samplings()[0])
    bad = eng.add_request(list(range(50)))
    empty = eng.add_request([])
    first = eng.step()
    errors = [o for o in first if o.finish_reason == "error"]
    assert [(o.seq_id, o.token_id, o.finished) for o in errors] == [(bad, None, True), (empty, None, True)]
    assert "50 tokens" in errors[0].error and "context holds 40" in errors[0].error
    assert "empty" in errors[1].error
    tokens = [o.token_id for o in first if o.seq_id == ok]
    while eng.has_unfinished():
        tokens += [o.token_id for o in eng.step() if o.seq_id == ok]
    assert tokens == reference()[0]


def test_generate_refuses_a_bad_prompt_before_running_anything():
    eng, runner = engine(config(max_model_len=40))
    with pytest.raises(ValueError, match=r"prompt 1: the prompt has 50 tokens"):
        eng.generate([PROMPTS[0], list(range(50))])
    assert not eng.has_unfinished() and runner.positions_computed == 0
    with pytest.raises(ValueError, match="2 sampling options for 1 prompts"):
        eng.generate([PROMPTS[0]], [SamplingOptions(), SamplingOptions()])


def test_abort_reports_the_end_and_frees_the_blocks():
    eng, _ = engine(config())
    a = eng.add_request(PROMPTS[1], SamplingOptions(max_tokens=50, ignore_eos=True))
    b = eng.add_request(PROMPTS[2], samplings()[2])
    eng.step()
    eng.step()
    assert eng.abort(a) and not eng.abort(a) and not eng.abort(12345)
    events = eng.step()
    assert events[0] == StepOutput(a, None, True, "abort")
    assert all(o.seq_id == b for o in events[1:])
    while eng.has_unfinished():
        eng.step()
    assert eng.block_manager.usage().used == 0


def test_a_runner_that_returns_the_wrong_number_of_results_is_an_error():
    class Broken(PagedHashRunner):
        def run(self, batch):
            return super().run(batch)[:-1]

    eng, _ = engine(config(), Broken)
    eng.add_request(PROMPTS[0])
    with pytest.raises(ValueError, match="runner returned 0 results for 1 chunks"):
        eng.step()


@pytest.mark.parametrize("num_kv_blocks", [256, 20], ids=["large-pool", "small-pool"])
def test_speculative_runner_gets_lookahead_slots_and_the_same_greedy_output(num_kv_blocks):
    cfg = config(num_kv_blocks, num_speculative_tokens=3)
    eng, runner = engine(cfg, SpeculativeHashRunner)
    ids = [eng.add_request(p, s) for p, s in zip(PROMPTS, samplings(), strict=True)]
    tokens: dict[int, list[int]] = {i: [] for i in ids}
    reasons = {}
    while eng.has_unfinished():
        for out in eng.step():
            tokens[out.seq_id].append(out.token_id)
            if out.finished:
                reasons[out.seq_id] = out.finish_reason
    assert [tokens[i] for i in ids] == reference()
    assert runner.accepted > 0
    assert max(runner.lookaheads) == 3
    if num_kv_blocks == 20:  # a short pool: some decodes get fewer draft slots rather than preempting
        assert min(runner.lookaheads) < 3
    assert eng.block_manager.usage().used == 0


def test_a_lone_request_that_outgrows_the_kv_pool_ends_with_length():
    eng, _ = engine(config(num_kv_blocks=2))  # 8 slots
    rid = eng.add_request([1, 2, 3], SamplingOptions(max_tokens=100, ignore_eos=True))
    events = []
    while eng.has_unfinished():
        events += eng.step()
    assert [e.token_id is not None for e in events] == [True] * 6 + [False]
    assert events[-1] == StepOutput(rid, None, True, "length")
    assert eng.block_manager.num_free_blocks == 2


def test_the_next_turn_of_a_chat_reuses_the_blocks_of_the_previous_reply():
    eng, _ = engine(config())
    prompt = PROMPTS[5]
    reply = eng.generate([prompt], SamplingOptions(max_tokens=15, ignore_eos=True))[0]
    turn2 = prompt + reply + [501, 502, 503]
    rid = eng.add_request(turn2, SamplingOptions(max_tokens=5, ignore_eos=True))
    out = []
    while eng.has_unfinished():
        out += [o.token_id for o in eng.step()]
    # Every full block whose K/V the first request computed: all its tokens but the last.
    assert eng.get_sequence(rid).num_cached_tokens == (len(prompt) + len(reply) - 1) // 4 * 4
    fresh, _ = engine(config(enable_prefix_caching=False))
    assert out == fresh.generate([turn2], SamplingOptions(max_tokens=5, ignore_eos=True))[0]

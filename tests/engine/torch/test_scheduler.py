"""The scheduler: chunked prefill under the token budget, mixed batches, stops, abort, preemption (no torch).

The "model" here is a pure function of a sequence's tokens, so every output can be predicted exactly;
tests/engine/torch/test_llm_engine.py adds a runner that reads its K/V back through the block tables.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from engine.torch.block_manager import BlockManager
from engine.torch.config import EngineConfig
from engine.torch.scheduler import ScheduledBatch, Scheduler
from engine.torch.sequence import SamplingOptions, Sequence, SequenceStatus

VOCAB = 97


def next_token(tokens: list[int]) -> int:
    return hash(tuple(tokens)) % VOCAB


def sample(batch: ScheduledBatch) -> list[int | None]:
    return [next_token(c.seq.token_ids) if c.is_last else None for c in batch.chunks]


def expected(prompt: list[int], sampling: SamplingOptions, cfg: EngineConfig) -> tuple[list[int], str]:
    """The completion a correct engine produces, decoded one token at a time with no scheduler at all."""
    tokens = list(prompt)
    while True:
        t = next_token(tokens)
        tokens.append(t)
        if t in sampling.stop_token_ids or (not sampling.ignore_eos and t in cfg.eos_token_ids):
            return tokens[len(prompt) :], "stop"
        if len(tokens) - len(prompt) >= sampling.max_tokens or len(tokens) >= cfg.max_model_len:
            return tokens[len(prompt) :], "length"


def make(**kw) -> Scheduler:
    cfg = EngineConfig(**{"num_kv_blocks": 64, "block_size": 4, **kw})
    return Scheduler(cfg, BlockManager(cfg.num_kv_blocks, cfg.block_size, cfg.enable_prefix_caching))


def check_invariants(sched: Scheduler, batch: ScheduledBatch) -> None:
    cfg, bm = sched.config, sched.block_manager
    assert batch.num_tokens + sum(c.lookahead for c in batch.chunks) <= cfg.max_num_batched_tokens
    assert len({id(c.seq) for c in batch.chunks}) == len(batch.chunks)
    assert len(sched.running) <= cfg.max_num_seqs
    for c in batch.chunks:
        assert c.seq.status is SequenceStatus.RUNNING
        assert c.start == c.seq.num_computed_tokens < c.end <= c.seq.num_tokens
        assert len(c.seq.block_table) * cfg.block_size >= c.end
    refs = Counter(b for s in sched.running for b in s.block_table)
    assert all(bm.ref_count(b) == refs.get(b, 0) for b in range(bm.num_blocks))
    assert bm.num_free_blocks == bm.num_blocks - len(refs)
    assert all(not s.block_table for s in sched.waiting)


def drive(sched: Scheduler, before_step=None, min_steps: int = 0, max_steps: int = 10_000) -> list[ScheduledBatch]:
    """Run the scheduler to the end with the pure-function model, checking invariants every step;
    `before_step(step)` may add or abort requests, and the loop runs at least `min_steps` steps."""
    batches = []
    for step in range(max_steps):
        if before_step is not None:
            before_step(step)
        if sched.is_finished() and step >= min_steps:
            break
        batch = sched.schedule()
        check_invariants(sched, batch)
        batches.append(batch)
        sched.postprocess(batch, sample(batch))
    assert sched.is_finished()
    return batches


def add(sched: Scheduler, seq_id: int, prompt: list[int], **sampling) -> Sequence:
    seq = Sequence(seq_id, prompt, SamplingOptions(**sampling))
    sched.add(seq)
    return seq


def test_chunked_prefill_keeps_every_step_within_the_token_budget():
    sched = make(max_num_batched_tokens=32, num_kv_blocks=128)
    seqs = [add(sched, i, [i + 1] * 100, max_tokens=5) for i in range(3)]
    batches = drive(sched)
    assert all(b.num_tokens <= 32 for b in batches)
    first = [c for b in batches for c in b.chunks if c.seq is seqs[0] and c.seq.num_prompt_tokens > c.start]
    assert [(c.start, c.end) for c in first[:4]] == [(0, 32), (32, 64), (64, 96), (96, 100)]
    for s in seqs:
        assert (s.completion_token_ids, s.finish_reason) == expected(s.token_ids[:100], s.sampling, sched.config)
    assert sched.block_manager.usage().used == 0


def test_decodes_go_first_then_running_prefills_then_new_sequences():
    sched = make(max_num_batched_tokens=16, num_kv_blocks=128)
    a = add(sched, 1, [1, 2, 3], max_tokens=50)
    for _ in range(2):  # a: prefill, then one decode
        batch = sched.schedule()
        sched.postprocess(batch, sample(batch))
    b = add(sched, 2, list(range(10, 50)), max_tokens=3)  # 40 tokens: three steps of prefill
    batch = sched.schedule()
    assert [(c.seq.seq_id, c.start, c.end) for c in batch.chunks] == [(1, 4, 5), (2, 0, 15)]
    sched.postprocess(batch, sample(batch))
    c = add(sched, 3, list(range(60, 66)), max_tokens=3)
    batch = sched.schedule()
    assert [(ch.seq.seq_id, ch.start, ch.end) for ch in batch.chunks] == [(1, 5, 6), (2, 15, 30)]
    sched.postprocess(batch, sample(batch))
    batch = sched.schedule()  # b's last 10 prompt tokens leave room for c's first 5
    assert [(ch.seq.seq_id, ch.start, ch.end) for ch in batch.chunks] == [(1, 6, 7), (2, 30, 40), (3, 0, 5)]
    sched.postprocess(batch, sample(batch))
    assert b.num_completion_tokens == 1 and c.num_completion_tokens == 0
    batch = sched.schedule()
    assert [(ch.seq.seq_id, ch.start, ch.end) for ch in batch.chunks] == [(1, 7, 8), (2, 40, 41), (3, 5, 6)]
    sched.postprocess(batch, sample(batch))
    drive(sched)
    assert a.finish_reason == b.finish_reason == c.finish_reason == "length"


def test_finished_sequences_leave_at_once_and_new_ones_join_between_steps():
    sched = make()
    a = add(sched, 1, [5, 6, 7], max_tokens=2)
    b = add(sched, 2, [8, 9], max_tokens=6)
    joined = []

    def join(step: int) -> None:
        if step == 3:
            joined.append(add(sched, 3, [1, 1, 1], max_tokens=2))

    drive(sched, before_step=join, min_steps=4)
    assert a.status is b.status is joined[0].status is SequenceStatus.FINISHED
    for s in (a, b, joined[0]):
        assert (s.completion_token_ids, s.finish_reason) == expected(
            s.token_ids[: s.num_prompt_tokens], s.sampling, sched.config
        )

    sched = make()
    a = add(sched, 1, [5, 6, 7], max_tokens=1)
    batch = sched.schedule()
    done = sched.postprocess(batch, sample(batch))
    assert done == [a] and sched.running == [] and a.block_table == []
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_blocks


def test_stop_rules():
    prompt = [3, 1, 4, 1, 5]
    first, second = next_token(prompt), next_token([*prompt, next_token(prompt)])
    assert first != second

    sched = make(eos_token_ids=(second,))
    s = add(sched, 1, prompt, max_tokens=10)
    drive(sched)
    assert (s.completion_token_ids, s.finish_reason) == ([first, second], "stop")

    sched = make(eos_token_ids=(second,))
    s = add(sched, 1, prompt, max_tokens=4, ignore_eos=True)
    drive(sched)
    assert s.num_completion_tokens == 4 and s.finish_reason == "length"

    sched = make()
    s = add(sched, 1, prompt, max_tokens=10, stop_token_ids=(first,))
    drive(sched)
    assert (s.completion_token_ids, s.finish_reason) == ([first], "stop")

    sched = make()
    s = add(sched, 1, prompt, max_tokens=3)
    drive(sched)
    assert s.num_completion_tokens == 3 and s.finish_reason == "length"

    sched = make(max_model_len=8)
    s = add(sched, 1, prompt, max_tokens=100)
    drive(sched)
    assert s.num_tokens == 8 and s.finish_reason == "length"


def test_abort_a_waiting_and_a_running_sequence_frees_their_blocks():
    sched = make(max_num_seqs=1)
    a = add(sched, 1, list(range(20)), max_tokens=50)
    b = add(sched, 2, list(range(30)), max_tokens=50)
    batch = sched.schedule()
    sched.postprocess(batch, sample(batch))
    assert a.status is SequenceStatus.RUNNING and b.status is SequenceStatus.WAITING
    assert sched.abort(2) is b and b.finish_reason == "abort"
    assert sched.abort(1) is a and a.finish_reason == "abort" and a.block_table == []
    assert sched.abort(1) is None and sched.abort(99) is None
    assert sched.is_finished() and sched.block_manager.usage().used == 0
    assert sched.schedule().chunks == []


def test_a_sequence_aborted_after_scheduling_is_skipped_by_postprocess():
    sched = make()
    a = add(sched, 1, [1, 2, 3], max_tokens=5)
    batch = sched.schedule()
    sched.abort(1)
    assert sched.postprocess(batch, sample(batch)) == []
    assert a.num_completion_tokens == 0 and a.finish_reason == "abort"


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ([], "the prompt is empty"),
        (list(range(16)), "the context holds 16"),
        (list(range(40)), "the context holds 16"),
    ],
)
def test_a_prompt_that_cannot_run_fails_alone_and_others_continue(prompt, message):
    sched = make(max_model_len=16)
    ok1 = add(sched, 1, [1, 2, 3], max_tokens=4)
    bad = add(sched, 2, prompt, max_tokens=4)
    ok2 = add(sched, 3, [4, 5, 6], max_tokens=4)
    assert bad.status is SequenceStatus.FINISHED and bad.finish_reason == "error"
    assert message in bad.error
    drive(sched)
    assert ok1.finish_reason == ok2.finish_reason == "length"
    assert ok1.num_completion_tokens == ok2.num_completion_tokens == 4


def test_a_prompt_larger_than_the_whole_kv_pool_fails_with_a_clear_error():
    sched = make(num_kv_blocks=4)  # 16 slots
    bad = add(sched, 1, list(range(16)))
    assert bad.finish_reason == "error" and "KV cache holds only 16" in bad.error


def test_a_lone_sequence_that_outgrows_the_pool_ends_with_length():
    sched = make(num_kv_blocks=2)  # 8 slots
    s = add(sched, 1, [1, 2, 3], max_tokens=100, ignore_eos=True)
    drive(sched)
    assert s.finish_reason == "length" and s.num_tokens == 9  # 8 tokens' K/V held, the 9th sampled
    assert s.completion_token_ids == expected([1, 2, 3], s.sampling, sched.config)[0][:6]
    assert sched.block_manager.num_free_blocks == 2


def test_running_out_of_blocks_preempts_and_the_preempted_sequence_gives_the_same_output():
    prompts = [[i, i + 1, i + 2, i + 3, i + 4] for i in range(0, 40, 10)]
    sched = make(num_kv_blocks=10, max_num_batched_tokens=64)  # 40 slots for 4 x 25 tokens
    seqs = [add(sched, i, p, max_tokens=20, ignore_eos=True) for i, p in enumerate(prompts)]
    drive(sched)
    assert sched.num_preemptions > 0 and any(s.num_preemptions for s in seqs)
    for s, p in zip(seqs, prompts, strict=True):
        assert (s.completion_token_ids, s.finish_reason) == expected(p, s.sampling, sched.config)
    assert sched.block_manager.usage().used == 0


def test_no_more_than_max_num_seqs_run_at_once():
    sched = make(max_num_seqs=2)
    seqs = [add(sched, i, [i, i, i], max_tokens=3) for i in range(5)]
    batches = drive(sched)
    assert max(len(b.chunks) for b in batches) == 2
    assert all(s.num_completion_tokens == 3 for s in seqs)


@pytest.mark.parametrize("prefix_caching", [True, False])
def test_sixty_random_sequences_never_leak_a_block(prefix_caching):
    rng = random.Random(7)
    sched = make(
        num_kv_blocks=48,
        block_size=4,
        max_num_seqs=12,
        max_num_batched_tokens=40,
        max_model_len=96,
        eos_token_ids=(0,),
        enable_prefix_caching=prefix_caching,
    )
    system_prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.choice([6, 9, 16]))] for _ in range(3)]
    specs = []
    for i in range(60):
        prompt = rng.choice(system_prompts) + [rng.randrange(1, VOCAB) for _ in range(rng.randrange(1, 30))]
        sampling = {"max_tokens": rng.randrange(1, 40), "ignore_eos": rng.random() < 0.5}
        specs.append((rng.randrange(0, 60), i, prompt, sampling))  # (arrival step, id, prompt, sampling)
    seqs: dict[int, Sequence] = {}
    aborted: set[int] = set()

    def arrive_and_abort(step: int) -> None:
        for arrival, i, prompt, sampling in specs:
            if arrival == step:
                seqs[i] = add(sched, i, prompt, **sampling)
        if step % 7 == 3 and sched.running:
            victim = rng.choice(sched.running)
            sched.abort(victim.seq_id)
            aborted.add(victim.seq_id)

    batches = drive(sched, before_step=arrive_and_abort, min_steps=60)
    assert len(seqs) == 60 and sched.is_finished()
    bm = sched.block_manager
    assert bm.usage().used == 0 and bm.num_free_blocks == bm.num_blocks
    assert sched.num_preemptions > 0
    for _arrival, i, prompt, _ in specs:
        s = seqs[i]
        assert s.is_finished
        if i not in aborted:
            assert (s.completion_token_ids, s.finish_reason) == expected(prompt, s.sampling, sched.config)
    if prefix_caching:
        assert bm.usage().cached_free > 0
    assert any(len(b.chunks) > 6 for b in batches)


def test_the_most_recently_admitted_sequence_is_preempted_first():
    sched = make(num_kv_blocks=6, max_num_batched_tokens=64)
    a, b, c = (add(sched, i, [i + 1] * 4, max_tokens=12, ignore_eos=True) for i in range(3))
    while sched.num_preemptions == 0:
        batch = sched.schedule()
        check_invariants(sched, batch)
        sched.postprocess(batch, sample(batch))
    assert (a.num_preemptions, b.num_preemptions, c.num_preemptions) == (0, 0, 1)
    assert sched.waiting[0] is c and c.block_table == []
    drive(sched)
    for s in (a, b, c):
        assert (s.completion_token_ids, s.finish_reason) == expected([s.token_ids[0]] * 4, s.sampling, sched.config)


def test_blocks_of_a_prompt_become_reusable_as_soon_as_their_chunk_is_computed():
    sched = make(max_num_batched_tokens=16)
    prompt = list(range(1, 41))
    add(sched, 1, prompt, max_tokens=2)
    batch = sched.schedule()
    sched.postprocess(batch, sample(batch))  # positions [0, 16) computed; the prompt is not done
    probe = Sequence(2, prompt[:30])
    sched.block_manager.allocate(probe)
    assert probe.num_cached_tokens == 16
    sched.block_manager.deallocate(probe)


def test_draft_slots_share_the_budget_and_never_crowd_out_a_decode():
    sched = make(max_num_seqs=8, max_num_batched_tokens=16, num_speculative_tokens=4)
    seqs = [add(sched, i, [i + 1] * 2, max_tokens=20, ignore_eos=True) for i in range(8)]
    batch = sched.schedule()  # the 8 prompts: 16 tokens
    sched.postprocess(batch, sample(batch))
    assert all(s.num_completion_tokens == 1 for s in seqs)
    batch = sched.schedule()
    check_invariants(sched, batch)
    assert [c.seq for c in batch.chunks] == seqs
    assert [c.lookahead for c in batch.chunks] == [4, 4, 0, 0, 0, 0, 0, 0]
    assert all(len(c.seq.block_table) * 4 >= c.end + c.lookahead for c in batch.chunks)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_kv_blocks": 0}, "num_kv_blocks must be a positive integer"),
        ({"num_kv_blocks": 8, "block_size": -1}, "block_size must be a positive integer"),
        ({"num_kv_blocks": 8, "max_model_len": 0}, "max_model_len must be a positive integer"),
        ({"num_kv_blocks": 8, "num_speculative_tokens": -1}, "num_speculative_tokens must be >= 0"),
        ({"num_kv_blocks": 8, "max_num_seqs": 32, "max_num_batched_tokens": 16}, "at least max_num_seqs"),
    ],
)
def test_bad_engine_configs_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(**fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": -0.5}, "temperature must be >= 0"),
        ({"top_p": 0.0}, "top_p must be in"),
        ({"top_p": 1.5}, "top_p must be in"),
        ({"top_k": -1}, "top_k must be >= 0"),
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
    ],
)
def test_bad_sampling_options_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        SamplingOptions(**fields)


def test_a_runner_result_that_does_not_fit_its_chunk_is_refused():
    sched = make()
    add(sched, 1, [1, 2, 3])
    batch = sched.schedule()
    with pytest.raises(ValueError, match="sampled no token for sequence 1"):
        sched.postprocess(batch, [None])
    with pytest.raises(ValueError, match="returned 2 tokens for sequence 1; its chunk had room for 0 drafts"):
        sched.postprocess(batch, [[5, 6]])
    with pytest.raises(ValueError, match="returned 2 results for 1 chunks"):
        sched.postprocess(batch, [5, 6])

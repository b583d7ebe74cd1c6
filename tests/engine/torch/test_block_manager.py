"""The KV block pool: allocation, reference counts, prefix hits by chained hash, LRU eviction (no torch)."""

from __future__ import annotations

import pytest

from engine.torch.block_manager import BlockManager, BlockUsage
from engine.torch.sequence import Sequence


def seq_of(tokens: list[int], seq_id: int = 0) -> Sequence:
    return Sequence(seq_id, tokens)


def compute_all(bm: BlockManager, seq: Sequence) -> None:
    """What the scheduler does once the runner has written the K/V of every token of `seq`."""
    seq.num_computed_tokens = seq.num_tokens
    bm.register_computed(seq)


def test_allocate_covers_every_token_and_deallocate_frees_all():
    bm = BlockManager(10, 4)
    seq = seq_of(list(range(10)))
    assert bm.can_allocate(seq)
    bm.allocate(seq)
    assert len(seq.block_table) == 3 and len(set(seq.block_table)) == 3
    assert bm.num_free_blocks == 7
    assert all(bm.ref_count(b) == 1 for b in seq.block_table)
    assert bm.usage() == BlockUsage(total=10, used=3, shared=0, cached_free=0)
    assert seq.num_cached_tokens == 0 and seq.num_computed_tokens == 0
    bm.deallocate(seq)
    assert seq.block_table == [] and bm.num_free_blocks == 10
    assert bm.usage().used == 0


def test_cannot_allocate_more_blocks_than_free():
    bm = BlockManager(2, 4)
    seq = seq_of(list(range(9)))  # 3 blocks
    assert not bm.can_allocate(seq)
    with pytest.raises(RuntimeError, match="not enough free KV blocks"):
        bm.allocate(seq)
    assert bm.num_free_blocks == 2 and seq.block_table == []


def test_allocating_twice_is_refused():
    bm = BlockManager(4, 4)
    seq = seq_of([1, 2, 3])
    bm.allocate(seq)
    with pytest.raises(RuntimeError, match="already holds blocks"):
        bm.allocate(seq)


def test_shared_prefix_of_two_and_a_half_blocks_reuses_exactly_two():
    bm = BlockManager(20, 16)
    prefix = list(range(100, 140))  # 40 tokens = 2.5 blocks
    a = seq_of(prefix + [1, 2, 3], seq_id=1)
    bm.allocate(a)
    compute_all(bm, a)
    b = seq_of(prefix + [7, 8, 9, 10], seq_id=2)
    bm.allocate(b)
    assert b.num_cached_tokens == 32 and b.num_computed_tokens == 32
    assert b.block_table[:2] == a.block_table[:2]
    assert b.block_table[2] != a.block_table[2]  # the half block is never shared
    assert [bm.ref_count(x) for x in b.block_table[:2]] == [2, 2]
    assert bm.ref_count(b.block_table[2]) == 1
    assert bm.usage() == BlockUsage(total=20, used=4, shared=2, cached_free=0)
    bm.deallocate(a)
    assert [bm.ref_count(x) for x in b.block_table[:2]] == [1, 1]
    assert bm.usage().shared == 0
    bm.deallocate(b)
    assert bm.num_free_blocks == 20


def test_a_different_earlier_block_breaks_the_chain():
    bm = BlockManager(20, 4)
    a = seq_of([1, 2, 3, 4, 5, 6, 7, 8, 9])
    bm.allocate(a)
    compute_all(bm, a)
    # Same second block, different first one: the second block's K/V depend on the first, so no hit.
    c = seq_of([9, 9, 9, 9, 5, 6, 7, 8, 9])
    bm.allocate(c)
    assert c.num_cached_tokens == 0
    assert not set(c.block_table) & set(a.block_table)


def test_blocks_are_not_shared_before_their_kv_is_computed():
    bm = BlockManager(20, 4)
    a = seq_of(list(range(12)))
    bm.allocate(a)
    b = seq_of(list(range(12)))
    bm.allocate(b)
    assert b.num_cached_tokens == 0
    a.num_computed_tokens = 4  # first chunk written: only block 0 becomes findable
    bm.register_computed(a)
    c = seq_of(list(range(12)))
    bm.allocate(c)
    assert c.num_cached_tokens == 4 and c.block_table[0] == a.block_table[0]


@pytest.mark.parametrize(("length", "cached"), [(32, 16), (33, 32), (17, 16), (16, 0)])
def test_a_fully_cached_prompt_still_recomputes_its_last_token(length, cached):
    bm = BlockManager(20, 16)
    tokens = list(range(50, 50 + length))
    a = seq_of(tokens)
    bm.allocate(a)
    compute_all(bm, a)
    b = seq_of(tokens)
    bm.allocate(b)
    assert b.num_cached_tokens == cached
    assert b.num_computed_tokens == cached < length  # the last token is left for the runner's logits
    assert len(b.block_table) == len(a.block_table)


def test_finished_blocks_stay_cached_then_evict_least_recently_used_first():
    bm = BlockManager(6, 4)
    a_tokens, b_tokens = list(range(9)), list(range(100, 109))  # 3 blocks each, 2 of them full
    a = seq_of(a_tokens)
    bm.allocate(a)
    compute_all(bm, a)
    bm.deallocate(a)
    b = seq_of(b_tokens)
    bm.allocate(b)
    compute_all(bm, b)
    bm.deallocate(b)
    assert bm.usage() == BlockUsage(total=6, used=0, shared=0, cached_free=4)
    # A newcomer needing 4 fresh blocks takes the 2 empty ones, then evicts A's (the older) blocks.
    c = seq_of(list(range(200, 213)))
    bm.allocate(c)
    assert bm.usage().cached_free == 2
    bm.deallocate(c)
    again_a, again_b = seq_of(a_tokens), seq_of(b_tokens)
    bm.allocate(again_a)
    bm.allocate(again_b)
    assert again_a.num_cached_tokens == 0
    assert again_b.num_cached_tokens == 8


def test_a_prefix_hit_makes_its_blocks_recently_used():
    bm = BlockManager(6, 4)
    a_tokens, b_tokens = list(range(9)), list(range(100, 109))
    for tokens in (a_tokens, b_tokens, a_tokens):  # A, B, then A again (a hit: A is now the newest)
        s = seq_of(tokens)
        bm.allocate(s)
        compute_all(bm, s)
        bm.deallocate(s)
    c = seq_of(list(range(200, 213)))
    bm.allocate(c)
    bm.deallocate(c)
    again_a, again_b = seq_of(a_tokens), seq_of(b_tokens)
    bm.allocate(again_a)
    bm.allocate(again_b)
    assert again_a.num_cached_tokens == 8
    assert again_b.num_cached_tokens == 0


def test_can_allocate_counts_hits_on_cached_free_blocks_as_taken():
    bm = BlockManager(3, 4)
    a = seq_of(list(range(9)))
    bm.allocate(a)
    compute_all(bm, a)
    bm.deallocate(a)
    # 3 blocks needed: 2 hits (taken off the free list) + 1 fresh = exactly the 3 free ones.
    b = seq_of(list(range(9)))
    assert bm.can_allocate(b)
    bm.allocate(b)
    assert b.num_cached_tokens == 8 and bm.num_free_blocks == 0
    c = seq_of([1])
    assert not bm.can_allocate(c)


def test_without_prefix_caching_nothing_is_reused_or_kept():
    bm = BlockManager(10, 4, enable_prefix_caching=False)
    a = seq_of(list(range(9)))
    bm.allocate(a)
    compute_all(bm, a)
    bm.deallocate(a)
    assert bm.usage().cached_free == 0
    b = seq_of(list(range(9)))
    bm.allocate(b)
    assert b.num_cached_tokens == 0


def test_two_sequences_computing_the_same_prompt_register_it_once():
    bm = BlockManager(10, 4)
    a, b = seq_of(list(range(9)), 1), seq_of(list(range(9)), 2)
    bm.allocate(a)
    bm.allocate(b)
    compute_all(bm, a)
    compute_all(bm, b)
    first_registered = a.block_table[:2]
    bm.deallocate(a)
    bm.deallocate(b)
    assert bm.usage() == BlockUsage(total=10, used=0, shared=0, cached_free=2)
    c = seq_of(list(range(9)))
    bm.allocate(c)
    assert c.num_cached_tokens == 8 and c.block_table[:2] == first_registered


def test_may_append_adds_a_block_at_the_boundary_and_registers_the_full_one():
    bm = BlockManager(4, 4)
    seq = seq_of([1, 2, 3, 4])
    bm.allocate(seq)
    seq.num_computed_tokens = 4  # prefill done
    seq.append_token(5)  # the sampled token starts block 1
    assert bm.can_append(seq)
    bm.may_append(seq)
    assert len(seq.block_table) == 2 and bm.num_free_blocks == 2
    other = seq_of([1, 2, 3, 4, 9])
    bm.allocate(other)
    assert other.num_cached_tokens == 4 and other.block_table[0] == seq.block_table[0]
    seq.append_token(6)
    bm.may_append(seq)  # still inside block 1: nothing new
    assert len(seq.block_table) == 2


def test_may_append_reserves_lookahead_slots_and_can_append_sees_the_pool_is_full():
    bm = BlockManager(3, 4)
    seq = seq_of([1, 2, 3])
    bm.allocate(seq)
    seq.num_computed_tokens = 2
    assert bm.can_append(seq, num_lookahead=9)  # 12 slots: the 3 blocks of the pool
    assert not bm.can_append(seq, num_lookahead=10)
    bm.may_append(seq, num_lookahead=5)
    assert len(seq.block_table) == 2 and bm.num_free_blocks == 1
    assert not bm.can_allocate(seq_of([7, 7, 7, 7, 7]))
    assert bm.can_append(seq, num_lookahead=9)
    assert not bm.can_append(seq, num_lookahead=10)


def test_hashes_survive_preemption_and_the_readmitted_sequence_hits_its_own_blocks():
    bm = BlockManager(8, 4)
    seq = seq_of(list(range(10)))
    bm.allocate(seq)
    compute_all(bm, seq)
    bm.deallocate(seq)  # preempted
    assert seq.num_computed_tokens == 0 and seq.block_table == []
    bm.allocate(seq)
    assert seq.num_cached_tokens == 8


def test_bad_pool_sizes_are_refused():
    with pytest.raises(ValueError, match="at least one block"):
        BlockManager(0, 16)
    with pytest.raises(ValueError, match="at least one block"):
        BlockManager(4, 0)


def test_eviction_takes_the_tail_of_a_freed_prefix_before_its_head():
    bm = BlockManager(3, 4)
    a_tokens = list(range(12))
    a = seq_of(a_tokens)
    bm.allocate(a)
    compute_all(bm, a)
    bm.deallocate(a)
    assert bm.usage().cached_free == 3
    other = seq_of([99])
    bm.allocate(other)  # one fresh block: the third block of A's prompt goes first
    bm.deallocate(other)
    again = seq_of(a_tokens[:9])  # wants A's first two blocks and one fresh block
    bm.allocate(again)
    assert again.num_cached_tokens == 8


def test_a_block_is_reused_only_under_the_same_parent_even_when_hashes_collide(monkeypatch):
    import engine.torch.block_manager as module

    monkeypatch.setattr(module, "chain_hash", lambda parent, tokens: hash(tokens))  # ignores the parent
    bm = BlockManager(20, 4)
    p, q, b = [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]
    for tokens in (p + b + [0], q + b + [0]):
        s = seq_of(tokens)
        bm.allocate(s)
        compute_all(bm, s)
        bm.deallocate(s)
    # Block [3,3,3,3] is registered under parent p only; after q it must not be served.
    e = seq_of(q + b + [5])
    bm.allocate(e)
    assert e.num_cached_tokens == 4

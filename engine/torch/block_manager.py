"""The paged KV pool: fixed-size blocks with reference counts and prefix caching by chained block hash.

A full block is identified by the hash of its tokens chained with the hash of the block before it, so
equal hashes mean equal prefixes, not just equal blocks. A block's hash is registered only once the
K/V of all its positions are computed, so a sequence never reuses a block another one is still filling.
Blocks whose last user leaves keep their hash ("cached free") and are evicted least recently used first,
after the blocks that hold nothing worth keeping.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from engine.torch.sequence import Sequence

_NO_PARENT = 0  # the "hash of the block before" the first block


@dataclass(frozen=True, slots=True)
class BlockUsage:
    """Counts of blocks: total; used (ref_count > 0); shared (ref_count > 1); cached_free (free but
    still holding a registered prefix that a new sequence may reuse)."""

    total: int
    used: int
    shared: int
    cached_free: int


class _Block:
    __slots__ = ("block_id", "ref_count", "hash", "parent_hash", "token_ids")

    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_count = 0
        self.hash: int | None = None  # set only while registered in the hash table
        self.parent_hash = _NO_PARENT
        self.token_ids: tuple[int, ...] = ()


def chain_hash(parent_hash: int, token_ids: tuple[int, ...]) -> int:
    """Hash of a full block's tokens and of the block before it (deterministic for ints)."""
    return hash((parent_hash, token_ids))


class BlockManager:
    """Hands out KV blocks to sequences; `seq.block_table[i]` holds positions [i*bs, (i+1)*bs)."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need at least one block of one token, got {num_blocks} x {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._blocks = [_Block(i) for i in range(num_blocks)]
        self._free_plain: deque[int] = deque(range(num_blocks))  # free, nothing cached: used first
        self._free_cached: OrderedDict[int, None] = OrderedDict()  # free, registered; oldest first
        self._hash_to_block: dict[int, int] = {}

    # ----- queries

    @property
    def num_free_blocks(self) -> int:
        return len(self._free_plain) + len(self._free_cached)

    def usage(self) -> BlockUsage:
        used = self.num_blocks - self.num_free_blocks
        shared = sum(1 for b in self._blocks if b.ref_count > 1)
        return BlockUsage(self.num_blocks, used, shared, len(self._free_cached))

    def ref_count(self, block_id: int) -> int:
        return self._blocks[block_id].ref_count

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    # ----- allocation of a whole sequence

    def can_allocate(self, seq: Sequence) -> bool:
        """Whether `allocate(seq)` would find enough blocks (counting prefix hits)."""
        hits = self._match_prefix(seq)
        # A hit on a cached free block takes that block off the free list too.
        taken_from_free = sum(1 for b in hits if self._blocks[b].ref_count == 0)
        return seq.num_blocks(self.block_size) - len(hits) + taken_from_free <= self.num_free_blocks

    def allocate(self, seq: Sequence) -> None:
        """Give `seq` blocks for all its tokens, reusing every leading full block found by hash.

        Sets num_cached_tokens and num_computed_tokens to the reused length, which always stays below
        num_tokens: at least the last token is recomputed so the runner gets its logits.
        """
        if seq.block_table:
            raise RuntimeError(f"sequence {seq.seq_id} already holds blocks")
        if not self.can_allocate(seq):
            raise RuntimeError(f"not enough free KV blocks for sequence {seq.seq_id}")
        hits = self._match_prefix(seq)
        for block_id in hits:
            block = self._blocks[block_id]
            if block.ref_count == 0:
                del self._free_cached[block_id]
            block.ref_count += 1
            seq.block_table.append(block_id)
        for _ in range(seq.num_blocks(self.block_size) - len(hits)):
            seq.block_table.append(self._take_fresh())
        seq.num_cached_tokens = seq.num_computed_tokens = len(hits) * self.block_size
        seq.num_registered_blocks = len(hits)

    def deallocate(self, seq: Sequence) -> None:
        """Release the blocks of `seq`; registered ones stay findable until evicted."""
        # Tail blocks first, so they are evicted before the prefix blocks many prompts share.
        for block_id in reversed(seq.block_table):
            block = self._blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                if block.hash is not None:
                    self._free_cached[block_id] = None
                else:
                    self._free_plain.append(block_id)
        seq.block_table.clear()
        seq.num_computed_tokens = 0
        seq.num_registered_blocks = 0
        # num_cached_tokens stays: it is the request's "tokens from cache" statistic.

    # ----- growth while decoding

    def can_append(self, seq: Sequence, num_lookahead: int = 0) -> bool:
        """Whether the blocks for all tokens (plus `num_lookahead` draft slots) can be had."""
        missing = self.blocks_needed(seq.num_tokens + num_lookahead) - len(seq.block_table)
        return max(0, missing) <= self.num_free_blocks

    def may_append(self, seq: Sequence, num_lookahead: int = 0) -> None:
        """After tokens were appended: register blocks that became full and computed, and add blocks
        so the table covers every token (plus `num_lookahead` draft slots)."""
        self.register_computed(seq)
        while len(seq.block_table) < self.blocks_needed(seq.num_tokens + num_lookahead):
            seq.block_table.append(self._take_fresh())

    def register_computed(self, seq: Sequence) -> None:
        """Make the full blocks whose K/V are all computed findable by later sequences."""
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        num_full = min(seq.num_computed_tokens, seq.num_tokens) // bs
        num_full = min(num_full, len(seq.block_table))
        if num_full <= seq.num_registered_blocks:
            return
        hashes = self._block_hashes(seq, num_full)
        for i in range(seq.num_registered_blocks, num_full):
            block = self._blocks[seq.block_table[i]]
            if block.hash is None and hashes[i] not in self._hash_to_block:
                block.hash = hashes[i]
                block.parent_hash = hashes[i - 1] if i else _NO_PARENT
                block.token_ids = tuple(seq.token_ids[i * bs : (i + 1) * bs])
                self._hash_to_block[block.hash] = block.block_id
            # else: a hit, or a duplicate of a block registered by another sequence; the first stays.
        seq.num_registered_blocks = num_full

    # ----- internals

    def _block_hashes(self, seq: Sequence, count: int) -> list[int]:
        """The chained hashes of the first `count` full blocks of `seq`, computed once per sequence."""
        hashes = seq.block_hashes
        bs = self.block_size
        while len(hashes) < count:
            i = len(hashes)
            parent = hashes[-1] if hashes else _NO_PARENT
            hashes.append(chain_hash(parent, tuple(seq.token_ids[i * bs : (i + 1) * bs])))
        return hashes

    def _match_prefix(self, seq: Sequence) -> list[int]:
        """Blocks holding the longest cached prefix of `seq`, whole blocks only, leaving the last token."""
        if not self.enable_prefix_caching or seq.num_tokens == 0:
            return []
        bs = self.block_size
        limit = (seq.num_tokens - 1) // bs
        hashes = self._block_hashes(seq, limit)
        hits: list[int] = []
        for i in range(limit):
            block_id = self._hash_to_block.get(hashes[i])
            if block_id is None:
                break
            block = self._blocks[block_id]
            parent = hashes[i - 1] if i else _NO_PARENT
            # Check the tokens too: a hash collision must never serve someone else's K/V.
            if block.parent_hash != parent or block.token_ids != tuple(seq.token_ids[i * bs : (i + 1) * bs]):
                break
            hits.append(block_id)
        return hits

    def _take_fresh(self) -> int:
        """A free block for new K/V: an empty one if any, else evict the least recently used cached one."""
        if self._free_plain:
            block_id = self._free_plain.popleft()
        elif self._free_cached:
            block_id, _ = self._free_cached.popitem(last=False)
        else:
            raise RuntimeError("the KV block pool is exhausted")
        block = self._blocks[block_id]
        if block.hash is not None:
            del self._hash_to_block[block.hash]
            block.hash = None
            block.token_ids = ()
        block.ref_count = 1
        return block_id

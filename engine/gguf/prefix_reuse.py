"""Where a prompt's KV prefix comes from: the live sequence, a parked one, RAM or disk.

Tiers, cheapest first:
1. the live sequence (sequence 0): the same conversation's next turn keeps its cells;
2. parked sequences (other sequence ids of the same KV cache, see kv_sequences.py): the
   pinned system prompts, prefilled at load; a chat that starts with one shares its cells;
3. saved states in RAM (prefix_cache.py): a conversation switched away from, a parked
   sequence evicted to make room;
4. saved states on disk (prefix_store.py): what the engine held when it last closed.

A prompt that drops a long part of the live sequence saves it first, so switching back and
forth never prefills a history twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from engine.gguf.kv_sequences import LIVE, KvCacheFull, KvSequences, ParkedSequence
from engine.gguf.llama_handle import LlamaHandle
from engine.gguf.prefix_cache import CacheEntry, CacheKey, PrefixCache, common_prefix_len
from engine.gguf.prefix_store import PrefixStore

log = logging.getLogger(__name__)

# The live sequence is kept (parked or saved) when a prompt drops at least this many of its
# tokens; shorter tails are cheaper to prefill again. Another source replaces the live prefix only
# when it shares at least MIN_RESTORE_GAIN more tokens. A copy is cheap beside a prefill: on 2 cores
# with the starter model, the state of 59 tokens is saved in 1.4 ms and restored in 0.4 ms, and 10
# tokens prefill in 35 ms (a GPU's prefill is faster, and so is its copy of a few cells). llama-server
# likewise takes the cached prompt sharing the most with a new one however little (its slots and its
# RAM cache): with 64 and 16 here, a short prompt that shared 15 tokens with one asked before was
# prefilled whole, and its first token took 1.3x llama-server's time (tests/bench/vs_llama_server.py).
MIN_SAVED_TOKENS = 16
MIN_RESTORE_GAIN = 4


class PrefixReuse:
    """The prefix tiers of one loaded model.

    Args:
        llama: the loaded model and its context (`n_seq` sequence ids: `slots` live ones, the rest parked).
        key: model identity + KV settings; saved states of another key are never used.
        cache: the RAM tier (budget 0 turns it off).
        store: the disk tier, or None.
    """

    def __init__(self, llama: LlamaHandle, key: CacheKey, cache: PrefixCache, store: PrefixStore | None,
                 slots: int = 1):
        self._llama = llama
        self.seqs = KvSequences(llama, slots)
        self._parking = llama.n_seq > slots
        self._key = key
        self._cache = cache
        self._store = store

    @property
    def _saving(self) -> bool:
        return self._cache.budget_bytes > 0 or self._store is not None

    # ------------------------------------------------------------ before a prompt

    def prepare(self, tokens: Sequence[int], room: int, slot: int = LIVE,
                boundary: Callable[[int], int] | None = None) -> int:
        """Put the longest known prefix of `tokens` into live sequence `slot`; return its length.

        At least the last prompt token is always evaluated again, so sampling starts from
        fresh logits. `room` is the cells the prompt and its reply need in all; parked
        sequences are evicted until what is not cached fits. Another live sequence (a reply
        running beside, with the same system prompt) is a source too: its cells are shared. `boundary`
        cuts the prefix kept back to where it may end (a prompt with media: never inside a media's span).
        """
        seqs = self.seqs
        live = seqs.tokens_of(slot)
        live_len = common_prefix_len(live, tokens)
        # A dropped tail with a media in it is kept however short: its picture costs an encode (seconds on a
        # CPU), not the prefill of a few tokens.
        if len(live) - live_len >= MIN_SAVED_TOKENS or _holds_media(live[live_len:]):
            self._keep_live(live, slot)
        parked, parked_len = seqs.lookup(tokens)
        beside, beside_len = seqs.lookup_live(tokens, slot)
        saved, saved_len = self._cache.lookup(self._key, tokens) if self._saving else (None, 0)
        if self._store is not None:
            on_disk, disk_len = self._store.lookup(self._key, tokens)
            if on_disk is not None and disk_len > max(saved_len, parked_len, beside_len,
                                                      live_len + MIN_RESTORE_GAIN - 1):
                loaded = self._store.load(on_disk)
                if loaded is not None:
                    self._cache.put(loaded)
                    saved, saved_len = loaded, disk_len
        gain = live_len + MIN_RESTORE_GAIN
        if beside is not None and beside_len >= max(saved_len, parked_len, gain):
            seqs.share_live(beside, slot, beside_len)
        elif parked is not None and parked_len >= max(saved_len, gain):
            seqs.resume(parked, parked_len, slot)
        elif saved is not None and saved_len >= gain:
            self._restore(saved, max(room, len(saved.tokens)), slot)
        cached = min(common_prefix_len(seqs.tokens_of(slot), tokens), len(tokens) - 1)
        if boundary is not None:
            cached = boundary(cached)
        # Recurrent models cannot drop a tail of their state, and a sliding-window cache may
        # have dropped cells the new tokens attend to: start over there. The window is checked
        # before trimming, which would leave it empty (and llama.cpp's minimum position unknown).
        if cached <= 0 or not self._window_intact(cached, slot) or not seqs.trim_live(cached, slot):
            cached = 0
            seqs.clear_live(slot)
        self._make_room(room - cached)  # the cached part already has its cells
        return cached

    def extend_to(self, tokens: Sequence[int], slot: int) -> int:
        """Bring live sequence `slot` to `tokens`: keep what it shares with them, drop the rest, prefill
        what is missing (next_turn.py, while nothing runs); how many tokens were prefilled. Nothing
        changes where the sequence holds all of `tokens` already, or cannot drop its tail
        (recurrent models, a sliding window gone past the shared part)."""
        seqs = self.seqs
        shared = common_prefix_len(seqs.tokens_of(slot), tokens)
        if shared <= 0 or shared == len(tokens) or not self._window_intact(shared, slot):
            return 0
        if not seqs.trim_live(shared, slot):
            return 0
        self._make_room(len(tokens) - shared)
        seqs.decode(tokens[shared:], self.on_full, slot)
        return len(tokens) - shared

    def _window_intact(self, cached: int, slot: int) -> bool:
        """With a sliding-window cache, the last window before `cached` must still be there."""
        n_swa = self._llama.n_swa
        if n_swa <= 0:
            return True
        first = self._llama.seq_pos_min(slot)
        return 0 <= first <= max(0, cached - n_swa)  # -1: the sequence holds no cell at all

    def _keep_live(self, live: tuple[int, ...], slot: int = LIVE) -> None:
        """Save a live sequence's state in the RAM tier (and on disk) before it is dropped.

        It is not parked: with one unified KV cache, attention runs over every cell up to the
        highest one in use, masked per sequence, so a parked chat of 2,000 tokens halved the
        decode speed of the live one here (44 → 23 tok/s), and a sequence placed above parked
        cells stays slow after they go. Saving costs a copy (0.4% of a cold prefill for 2,000
        tokens) and leaves the freed cells to the next sequence, low in the cache.
        """
        entry = self._save(slot, live)
        if entry is not None and self._store is not None:
            self._store.put(entry)

    def set_aside(self, slot: int) -> None:
        """Save a live sequence no reply uses now to the RAM tier and free its cells: every cell in use
        slows every other sequence's attention (a unified cache attends up to its highest used cell)."""
        live = self.seqs.tokens_of(slot)
        if live:
            self._keep_live(live, slot)
            self.seqs.clear_live(slot)

    def _restore(self, entry: CacheEntry, room: int, slot: int = LIVE) -> None:
        """Load a saved state into a live sequence; an entry llama.cpp refuses twice is dropped."""
        self.seqs.clear_live(slot)
        self._make_room(room)
        if not self._llama.restore_state(entry.state, slot):
            # A state needs its cells in one run: free cells scattered between parked
            # sequences may not do. Evict them all and try once more.
            while (victim := self.seqs.eviction_candidate()) is not None:
                self._evict(victim)
            if not self._llama.restore_state(entry.state, slot):
                log.warning("llama.cpp refused a cached state of %d tokens; dropped it", len(entry.tokens))
                self._cache.remove(entry)
                self.seqs.clear_live(slot)
                return
        self.seqs.live_restored(entry.tokens, slot)

    # ------------------------------------------------------------ room in the KV cache

    def _make_room(self, room: int) -> None:
        """Evict parked sequences until `room` cells are free (by the ledger)."""
        n_ctx = self._llama.n_ctx
        while self.seqs.used_cells() + room > n_ctx:
            victim = self.seqs.eviction_candidate()
            if victim is None:
                return
            self._evict(victim)

    def on_full(self) -> None:
        """llama.cpp found no free cells for a batch: evict one parked sequence, or give up."""
        victim = self.seqs.eviction_candidate()
        if victim is None:
            raise KvCacheFull("The KV cache is full.")
        self._evict(victim)

    def _evict(self, parked: ParkedSequence) -> None:
        """Drop a parked sequence from the KV cache, keeping its state in RAM where there is room."""
        entry = self._save(parked.seq_id, parked.tokens, parked.pinned)
        if entry is not None and self._store is not None and not parked.pinned:
            self._store.put(entry)
        self.seqs.evict(parked)

    def _save(self, seq_id: int, tokens: tuple[int, ...], pinned: bool = False) -> CacheEntry | None:
        """Copy the KV state of one sequence into the RAM tier; the entry, or None if not saved."""
        if not self._saving or (len(tokens) < MIN_SAVED_TOKENS and not pinned and not _holds_media(tokens)):
            return None
        for entry in self._cache:
            if entry.key == self._key and entry.tokens == tokens:
                return entry
        state = self._llama.save_state(seq_id)
        if state is None:
            return None
        entry = CacheEntry(self._key, tokens, state, pinned)
        self._cache.put(entry)
        return entry

    # ------------------------------------------------------------ pinning, closing

    def pin(self, tokens: Sequence[int]) -> None:
        """Prefill `tokens` (a preset's system prompt) and keep them parked as a pinned sequence."""
        cached = self.prepare(tokens, room=len(tokens))
        self.seqs.decode(tokens[cached:], self.on_full)
        if self._parking and self.seqs.park_live(pinned=True):
            return
        self._save(LIVE, tuple(tokens), pinned=True)

    def sequence_tokens(self) -> dict[int, tuple[int, ...]]:
        """Tokens of every sequence holding any in the KV cache, by sequence id (the live ones first)."""
        tokens = {slot: t for slot in range(self.seqs.slots) if (t := self.seqs.tokens_of(slot))}
        tokens.update((p.seq_id, p.tokens) for p in self.seqs.parked)
        return tokens

    def keep_for_later(self) -> None:
        """Save the live sequences to RAM and disk (the context is about to go; pinned prompts
        are prefilled again at the next load).

        A reload of the same model and settings finds them in RAM; a new engine, on disk.
        """
        for slot in range(self.seqs.slots):
            entry = self._save(slot, self.seqs.tokens_of(slot))
            if entry is not None and self._store is not None:
                self._store.put(entry)


def _holds_media(tokens: Sequence[int]) -> bool:
    """Whether tokens hold an image's or audio's positions (media tokens are negative: media_prompt.py)."""
    return any(t < 0 for t in tokens)

"""The RAM tier of the prefix cache: saved llama.cpp sequence states, LRU under a byte budget.

An entry is the KV state of one token sequence (what `llama_state_seq_get_data` returns for
it), keyed by the model's identity and the settings that shape KV contents. A lookup finds
the entry that shares the longest token prefix with a new prompt: restoring it and dropping
the cells past that prefix leaves exactly the KV of the shared prefix.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.gguf.llama_handle import VERSION


@dataclass(slots=True, frozen=True)
class CacheKey:
    """What must match for a saved state to be valid: the model file and the KV layout."""

    model: str  # model_identity(...)
    settings: str  # settings_key(...)


@dataclass(slots=True, eq=False)
class CacheEntry:
    key: CacheKey
    tokens: tuple[int, ...]
    state: bytearray  # the bytes of llama_state_seq_get_data for `tokens`; never mutated
    pinned: bool = False  # a preset's system prompt: evicted only when nothing else is left

    @property
    def nbytes(self) -> int:
        return len(self.state)


def model_identity(path: Path) -> str:
    """The model file as a cache key part: a changed or replaced file gets a new identity."""
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def settings_key(n_ctx: int, kv_type: str, flash_attn: bool, n_gpu_layers: int, swa_full: bool = True) -> str:
    """The load settings that change what a KV state holds or how it was computed."""
    key = f"llama-cpp-python={VERSION};n_ctx={n_ctx};kv={kv_type};fa={int(flash_attn)};ngl={n_gpu_layers}"
    return key if swa_full else key + ";swa=window"  # a windowed state holds fewer cells


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix; slices compare in C, so long token lists cost little."""
    a, b = tuple(a), tuple(b)
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    # Invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi].
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PrefixCache:
    """Sequence states in RAM, least recently used evicted first, total bytes ≤ `budget_bytes`."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = max(0, budget_bytes)
        self._entries: OrderedDict[tuple[CacheKey, tuple[int, ...]], CacheEntry] = OrderedDict()
        self._total = 0

    @property
    def total_bytes(self) -> int:
        return self._total

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[CacheEntry]:
        """Entries from least to most recently used."""
        return iter(list(self._entries.values()))

    def __contains__(self, item: tuple[CacheKey, Sequence[int]]) -> bool:
        key, tokens = item
        return (key, tuple(tokens)) in self._entries

    def lookup(self, key: CacheKey, tokens: Sequence[int]) -> tuple[CacheEntry | None, int]:
        """The entry sharing the longest prefix with `tokens`, and that length; marks it used."""
        tokens = tuple(tokens)
        best, best_len = None, 0
        for (k, entry_tokens), entry in self._entries.items():
            if k != key or not entry_tokens or entry_tokens[0] != (tokens[0] if tokens else None):
                continue
            n = common_prefix_len(entry_tokens, tokens)
            # Ties go to the smaller state: cheaper to restore.
            if n > best_len or (n == best_len and best is not None and entry.nbytes < best.nbytes):
                best, best_len = entry, n
        if best is not None:
            self._entries.move_to_end((best.key, best.tokens))
        return best, best_len

    def put(self, entry: CacheEntry) -> bool:
        """Store `entry` (most recently used); False when it alone exceeds the budget.

        Entries of the same key whose tokens are a prefix of the new one are dropped: every
        lookup they could answer, the new entry answers at least as well (pinned ones stay:
        they must outlive the longer entries, which LRU may evict).
        """
        if entry.nbytes > self.budget_bytes or not entry.tokens:
            return False
        for (k, tokens), old in list(self._entries.items()):
            extended = len(tokens) <= len(entry.tokens) and entry.tokens[: len(tokens)] == tokens
            if k == entry.key and extended and (not old.pinned or old.tokens == entry.tokens):
                entry.pinned = entry.pinned or (old.pinned and old.tokens == entry.tokens)
                self.remove(old)
        self._entries[(entry.key, entry.tokens)] = entry
        self._total += entry.nbytes
        while self._total > self.budget_bytes:
            victims = [e for e in self._entries.values() if not e.pinned] or list(self._entries.values())
            self.remove(victims[0])
        return True

    def remove(self, entry: CacheEntry) -> None:
        if self._entries.pop((entry.key, entry.tokens), None) is not None:
            self._total -= entry.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self._total = 0


"""Sequences in llama.cpp's KV cache: the live ones (one per reply slot, 0 … slots-1) and parked ones.

The context is created with several sequence ids over one unified KV cache (llama_handle.py).
A live sequence is one a reply is generated in: the engine runs up to `slots` replies at once
(engine/gguf/reply_batch.py), each in its own; with one slot, sequence 0 is the one being
generated. A sequence is *parked* by `seq_cp`, which adds another
sequence id to the same cells, so nothing is copied; a prompt that shares a prefix with a
parked sequence gets those cells back the same way. Pinned sequences (a preset's system
prompt, prefilled at load) are parked so; prefix_reuse.py says why other chats are not.

All sequences share the context's `n_ctx` cells. llama.cpp has no call that counts the cells
in use across sequences, so this class keeps its own ledger: every cell is an integer id,
a sequence is the list of its cells, and `seq_cp` copies ids. What llama.cpp frees when a
sequence is removed is exactly what no other list still holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from engine.gguf.llama_handle import LlamaHandle
from engine.gguf.prefix_cache import common_prefix_len

LIVE = 0


class KvCacheFull(RuntimeError):
    """llama.cpp found no free cells for a batch, even with every parked sequence evicted."""


@dataclass(slots=True, eq=False)
class ParkedSequence:
    seq_id: int
    tokens: tuple[int, ...]
    cells: list[int]
    pinned: bool = False


class KvSequences:
    """The live sequences and the parked ones of one llama.cpp context.

    Args:
        llama: the loaded model and context; its `n_seq` sequence ids.
        slots: how many of them are live (reply slots); the rest are for parking.
    """

    def __init__(self, llama: LlamaHandle, slots: int = 1):
        if not 1 <= slots <= llama.n_seq:
            raise ValueError(f"{slots} reply slots in a context of {llama.n_seq} sequences")
        self._llama = llama
        self.slots = slots
        self._free_ids = list(range(llama.n_seq - 1, slots - 1, -1))
        self._parked: list[ParkedSequence] = []  # least recently used first
        self._live: list[list[int]] = [[] for _ in range(slots)]  # each slot's tokens, from position 0
        self._live_cells: list[list[int]] = [[] for _ in range(slots)]
        self._ids = itertools.count()

    # ------------------------------------------------------------ what is there

    @property
    def live_tokens(self) -> tuple[int, ...]:
        """The tokens of sequence 0 (the one slot when there is one)."""
        return tuple(self._live[LIVE])

    @property
    def n_live(self) -> int:
        return len(self._live[LIVE])

    def tokens_of(self, slot: int) -> tuple[int, ...]:
        return tuple(self._live[slot])

    def length(self, slot: int) -> int:
        return len(self._live[slot])

    @property
    def parked(self) -> tuple[ParkedSequence, ...]:
        return tuple(self._parked)

    def used_cells(self) -> int:
        """Cells holding a token of any sequence, shared cells counted once."""
        used: set[int] = set()
        for cells in self._live_cells:
            used.update(cells)
        for parked in self._parked:
            used.update(parked.cells)
        return len(used)

    def slot_tokens(self) -> tuple[int, ...]:
        """How many tokens each live slot holds (what the memory panel shows per reply)."""
        return tuple(len(live) for live in self._live)

    def lookup_live(self, tokens: Sequence[int], besides: int) -> tuple[int | None, int]:
        """The other live slot sharing the longest prefix with `tokens` (a reply running beside), and that length."""
        best, best_len = None, 0
        for slot, live in enumerate(self._live):
            if slot != besides and (n := common_prefix_len(live, tokens)) > best_len:
                best, best_len = slot, n
        return best, best_len

    def lookup(self, tokens: Sequence[int]) -> tuple[ParkedSequence | None, int]:
        """The parked sequence sharing the longest prefix with `tokens`, and that length."""
        best, best_len = None, 0
        for parked in self._parked:
            n = common_prefix_len(parked.tokens, tokens)
            if n > best_len:
                best, best_len = parked, n
        return best, best_len

    # ------------------------------------------------------------ the live sequences

    def trim_live(self, n: int, slot: int = LIVE) -> bool:
        """Keep the first `n` tokens of a live sequence; False where the model cannot (recurrent)."""
        if n >= len(self._live[slot]):
            return True
        if not self._llama.seq_rm(slot, n, -1):
            return False
        del self._live[slot][n:]
        del self._live_cells[slot][n:]
        return True

    def clear_live(self, slot: int = LIVE) -> None:
        self._llama.seq_rm(slot, -1, -1)
        self._live[slot].clear()
        self._live_cells[slot].clear()

    def live_restored(self, tokens: Sequence[int], slot: int = LIVE) -> None:
        """A live sequence was just filled from a saved state holding `tokens` (in new cells)."""
        self._live[slot] = list(tokens)
        self._live_cells[slot] = [next(self._ids) for _ in tokens]

    def share_live(self, source: int, slot: int, n: int) -> None:
        """Start live sequence `slot` with the first `n` tokens of another live one, sharing its cells."""
        self._llama.seq_rm(slot, -1, -1)
        self._llama.seq_cp(source, slot, 0, n)
        self._live[slot] = self._live[source][:n]
        self._live_cells[slot] = self._live_cells[source][:n]

    def decode(self, tokens: Sequence[int], on_full, slot: int = LIVE) -> None:
        """Append `tokens` to live sequence `slot` in batches (a pinned prompt at load, a finished
        chat's next-turn history when idle; replies go through reply_batch.py); the logits of the
        last one are kept.

        `on_full()` is called when llama.cpp finds no free cells; it frees some (or raises)
        and the batch is tried again.
        """
        llama = self._llama
        live = self._live[slot]
        llama.seq_rm(slot, len(live), -1)
        for i in range(0, len(tokens), llama.n_batch):
            batch = list(tokens[i : i + llama.n_batch])
            while True:
                code = llama.decode(batch, len(live), slot)
                if code == 0:
                    break
                if code != 1:  # 1: no KV slot for the batch; anything else is an error
                    raise RuntimeError(f"llama_decode returned {code}")
                on_full()
            self.appended(slot, batch)

    def appended(self, slot: int, tokens: Sequence[int]) -> None:
        """`tokens` were decoded at the end of live sequence `slot` (by a batch of several sequences)."""
        self._live[slot].extend(tokens)
        self._live_cells[slot].extend(next(self._ids) for _ in tokens)

    # ------------------------------------------------------------ parking

    def park_live(self, pinned: bool = False) -> ParkedSequence | None:
        """Give sequence 0's cells another sequence id; None when no id is free (evict first)."""
        live = self.live_tokens
        if not live or not self._free_ids:
            return None
        for parked in self._parked:
            if parked.tokens == live:  # already parked: just mark it used
                parked.pinned = parked.pinned or pinned
                self._touch(parked)
                return parked
        seq_id = self._free_ids.pop()
        self._llama.seq_cp(LIVE, seq_id, -1, -1)
        parked = ParkedSequence(seq_id, live, list(self._live_cells[LIVE]), pinned)
        self._parked.append(parked)
        return parked

    def resume(self, parked: ParkedSequence, n: int, slot: int = LIVE) -> None:
        """Make the first `n` tokens of `parked` a live sequence, sharing its cells (it stays parked)."""
        self._llama.seq_rm(slot, -1, -1)
        self._llama.seq_cp(parked.seq_id, slot, 0, n)
        self._live[slot] = list(parked.tokens[:n])
        self._live_cells[slot] = parked.cells[:n]
        self._touch(parked)

    def eviction_candidate(self) -> ParkedSequence | None:
        """The parked sequence to evict next: the least recently used, pinned ones last."""
        for parked in self._parked:
            if not parked.pinned:
                return parked
        return self._parked[0] if self._parked else None

    def evict(self, parked: ParkedSequence) -> None:
        self._llama.seq_rm(parked.seq_id, -1, -1)
        self._parked.remove(parked)
        self._free_ids.append(parked.seq_id)

    def clear(self) -> None:
        self._llama.clear()
        for slot in range(self.slots):
            self._live[slot].clear()
            self._live_cells[slot].clear()
        for parked in list(self._parked):
            self._parked.remove(parked)
            self._free_ids.append(parked.seq_id)

    def _touch(self, parked: ParkedSequence) -> None:
        self._parked.remove(parked)
        self._parked.append(parked)


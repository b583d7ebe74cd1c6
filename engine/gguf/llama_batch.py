"""A llama_batch: the tokens one llama_decode call takes, of one sequence or several (part of the
llama-cpp-python boundary with llama_handle.py: only the `llama_*` files import llama_cpp)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp


@dataclass(slots=True, frozen=True)
class BatchRow:
    """One token of a batch of several sequences: where it goes and whether its logits are wanted."""

    token: int
    pos: int
    seq_id: int
    logits: bool


class Batch:
    """A llama_batch of up to `size` tokens, each of one sequence."""

    def __init__(self, size: int):
        self.size = size
        self.batch = llama_cpp.llama_batch_init(size, 0, 1)

    def fill(self, tokens: Sequence[int], first_pos: int, seq_id: int) -> None:
        """`tokens` of one sequence at positions first_pos…, logits for the last one only (several
        sequences, or logits of every row to verify drafts: fill_rows)."""
        if not 0 < len(tokens) <= self.size:
            raise ValueError(f"a batch holds 1 to {self.size} tokens, not {len(tokens)}")
        b = self.batch
        b.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, first_pos + i, 1, False
            b.seq_id[i][0] = seq_id
        b.logits[len(tokens) - 1] = True

    def fill_rows(self, rows: Sequence[BatchRow]) -> None:
        """Tokens of several sequences in one batch, each with its own position and logits flag."""
        if not 0 < len(rows) <= self.size:
            raise ValueError(f"a batch holds 1 to {self.size} tokens, not {len(rows)}")
        b = self.batch
        b.n_tokens = len(rows)
        for i, row in enumerate(rows):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = row.token, row.pos, 1, row.logits
            b.seq_id[i][0] = row.seq_id

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None

"""One sequence over its own run of KV blocks, driven directly (no scheduler).

Speculative decoding uses it for the target and the draft: it evaluates several tokens in
one pass, returns the logits of each, and rolls back rejected tokens by forgetting them (their
slots are overwritten by the next pass).
"""

from __future__ import annotations

import torch

from engine.torch.arch import CausalLM
from engine.torch.attention import AttnMeta, KVCache, PrefillSpan


class PagedSequence:
    def __init__(self, model: CausalLM, kv: KVCache, blocks: list[int] | None = None):
        self.model, self.kv = model, kv
        blocks = list(range(kv.num_blocks)) if blocks is None else blocks
        self.table = torch.tensor(blocks, dtype=torch.long, device=model.device)
        self.capacity = len(blocks) * kv.block_size
        self.num_cached = 0  # positions [0, num_cached) hold valid K/V

    @torch.inference_mode()
    def forward(self, tokens: list[int], all_logits: bool = True) -> torch.Tensor:
        """Evaluate `tokens` after the cached ones; logits [len, vocab] (or [1, vocab] of the last)."""
        n, start = len(tokens), self.num_cached
        if start + n > self.capacity:
            raise ValueError(f"the sequence would need {start + n} positions; its blocks hold {self.capacity}")
        device = self.model.device
        positions = torch.arange(start, start + n, device=device)
        bs = self.kv.block_size
        slots = self.table[positions // bs] * bs + positions % bs
        meta = AttnMeta(slot_mapping=slots, prefills=[PrefillSpan(0, n, start + n, self.table)])
        ids = torch.tensor(tokens, dtype=torch.long, device=device)
        hidden = self.model(ids, positions, self.kv, meta)
        self.num_cached = start + n
        return self.model.logits(hidden if all_logits else hidden[-1:])

    def truncate(self, length: int) -> None:
        """Forget positions from `length` on."""
        self.num_cached = min(self.num_cached, length)

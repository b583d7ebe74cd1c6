"""Attention over the paged KV cache.

The cache of one layer is [num_blocks, block_size, kv_heads, head_dim]; token position p of a
sequence lives at slot block_table[p // block_size] * block_size + p % block_size. Each step
first writes the new tokens' K/V into their slots, then every query gathers its sequence's
keys from the cache by slot and runs `scaled_dot_product_attention` (FlashAttention or
memory-efficient kernels where the device has them). Decode tokens of many sequences go in
one batched call, masked to each sequence's length; prefill chunks go one by one, causal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass(slots=True)
class PrefillSpan:
    """Rows [start, start + length) of the flat batch: the last `length` of `context` tokens of a sequence."""

    start: int
    length: int
    context: int
    block_table: torch.Tensor  # long [>= ceil(context / block_size)]


@dataclass(slots=True)
class AttnMeta:
    """Where this step's tokens go in the cache and what each one attends to.

    Decode rows (one token per sequence) come first in the flat batch: rows [0, num_decodes).
    """

    slot_mapping: torch.Tensor  # long [T]
    prefills: list[PrefillSpan] = field(default_factory=list)
    num_decodes: int = 0
    # Cache slots each decode row attends to, in position order; rows shorter than the longest are
    # padded (with any slot) and masked. No mask when every row is as long as the longest.
    decode_slots: torch.Tensor | None = None  # long [num_decodes, L]
    decode_mask: torch.Tensor | None = None  # bool [num_decodes, 1, 1, L]


def slots_at(block_table: torch.Tensor, positions: torch.Tensor, block_size: int) -> torch.Tensor:
    """Cache slots of a sequence's token `positions` (long tensors on the same device)."""
    return block_table[positions // block_size] * block_size + positions % block_size


def decode_slots(
    tables: list[torch.Tensor], lengths: list[int], width: int, block_size: int, pad_slot: int
) -> torch.Tensor:
    """long [len(tables), width]: row r holds the slots of positions [0, lengths[r]), then `pad_slot`."""
    rows = torch.full((len(tables), width), pad_slot, dtype=torch.long)
    span = torch.arange(width)
    for r, (table, n) in enumerate(zip(tables, lengths, strict=True)):
        rows[r, :n] = slots_at(table, span[:n], block_size)
    return rows


class KVCache:
    """K and V blocks for every layer; one extra scratch block takes the writes of padding rows."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ):
        shape = (num_layers, num_blocks + 1, block_size, num_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.scratch_slot = num_blocks * block_size

    @property
    def bytes_per_block(self) -> int:
        layer_block = self.k[0, 0]
        return 2 * self.k.shape[0] * layer_block.numel() * layer_block.element_size()

    @property
    def allocated_bytes(self) -> int:
        return self.bytes_per_block * self.num_blocks


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    meta: AttnMeta,
    scale: float,
) -> torch.Tensor:
    """q: [T, Hq, D], k/v: [T, Hkv, D] of this step; cache_*: one layer's blocks. Returns [T, Hq, D]."""
    num_blocks, block_size, kv_heads, head_dim = cache_k.shape
    flat_k = cache_k.view(num_blocks * block_size, kv_heads, head_dim)
    flat_v = cache_v.view(num_blocks * block_size, kv_heads, head_dim)
    flat_k.index_copy_(0, meta.slot_mapping, k)
    flat_v.index_copy_(0, meta.slot_mapping, v)
    gqa = q.shape[1] != kv_heads
    out = torch.empty_like(q)
    n = meta.num_decodes
    if n:
        slots = meta.decode_slots
        # index_select on the flat cache: a plain gather, several times cheaper than advanced indexing
        # by block table, and it reads only the positions in use.
        keys = flat_k.index_select(0, slots.flatten()).view(*slots.shape, kv_heads, head_dim).transpose(1, 2)
        values = flat_v.index_select(0, slots.flatten()).view(*slots.shape, kv_heads, head_dim).transpose(1, 2)
        o = F.scaled_dot_product_attention(
            q[:n].unsqueeze(2), keys, values, attn_mask=meta.decode_mask, scale=scale, enable_gqa=gqa
        )
        out[:n] = o.squeeze(2)
    for span in meta.prefills:
        rows = slice(span.start, span.start + span.length)
        qs = q[rows].transpose(0, 1).unsqueeze(0)  # [1, Hq, len, D]
        if span.context == span.length:  # the chunk is the whole sequence so far: no cache read
            ks, vs, mask, causal = k[rows], v[rows], None, True
        else:
            n_blocks = -(-span.context // block_size)
            table = span.block_table[:n_blocks]
            ks = cache_k[table].flatten(0, 1)[: span.context]
            vs = cache_v[table].flatten(0, 1)[: span.context]
            mask = torch.ones(span.length, span.context, dtype=torch.bool, device=q.device).tril(
                span.context - span.length
            )
            causal = False
        o = F.scaled_dot_product_attention(
            qs,
            ks.transpose(0, 1).unsqueeze(0),
            vs.transpose(0, 1).unsqueeze(0),
            attn_mask=mask,
            is_causal=causal,
            scale=scale,
            enable_gqa=gqa,
        )
        out[rows] = o.squeeze(0).transpose(0, 1)
    return out

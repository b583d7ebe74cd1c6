"""GPTQ checkpoints (AutoGPTQ / GPTQModel layout) read into the grouped integer weight AWQ uses.

The layout, as AutoGPTQ's and GPTQModel's packers write it and vLLM's loader reads it:
  qweight  int32 [in * bits / 32, out]: 32 / bits values per word along the *input* rows,
           row 32/bits * r + i in bits i*bits.. of word r (plain order, unlike AWQ's interleave);
  qzeros   int32 [groups, out * bits / 32]: zero points packed the same way along the *output* columns;
  scales   float16 [groups, out];
  g_idx    int32 [in]: the group of each input row (act-order checkpoints permute them).
A weight is (q - zero) * scale. The v1 format ("gptq") stores every zero point minus one, so a
symmetric 4-bit checkpoint holds 7 for 8; the subtraction wraps in `bits` bits, and reading adds
the one back modulo 2**bits (v2, "gptq_v2", stores zeros as they are).
"""

from __future__ import annotations

import torch

from engine.torch.awq import INT4_GROUPS, AwqWeight
from engine.torch.quant_config import CheckpointError, GptqConfig


def unpack_rows(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """int32 [rows * bits / 32, cols] -> uint8 [rows, cols]: the values of each word go down the rows."""
    per_word = 32 // bits
    shifts = torch.arange(0, 32, bits, dtype=torch.int32).view(1, per_word, 1)
    values = (packed.to(torch.int32).unsqueeze(1) >> shifts) & ((1 << bits) - 1)
    return values.reshape(-1, packed.shape[1]).to(torch.uint8)


def unpack_cols(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """int32 [rows, cols * bits / 32] -> uint8 [rows, cols]: the values of each word go along the row."""
    shifts = torch.arange(0, 32, bits, dtype=torch.int32)
    values = (packed.to(torch.int32).unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    return values.reshape(packed.shape[0], -1).to(torch.uint8)


def grouped_order(g_idx: torch.Tensor, n_groups: int, group_size: int) -> torch.Tensor | None:
    """The column order that makes every group contiguous, or None when g_idx already is i // group_size.

    Raises:
        ValueError: g_idx names groups that do not exist, or does not give each group its share of columns.
    """
    n_in = g_idx.numel()
    g = g_idx.to(torch.int64)
    if int(g.min()) < 0 or int(g.max()) >= n_groups:
        raise ValueError(f"g_idx names group {int(g.max()) if int(g.max()) >= n_groups else int(g.min())}, "
                         f"but there are {n_groups} groups")
    sequential = torch.arange(n_in) // group_size
    if torch.equal(g, sequential):
        return None
    perm = torch.argsort(g, stable=True)
    if not torch.equal(g[perm], sequential):
        raise ValueError(f"g_idx does not put {group_size} input columns in each group")
    return perm


def gptq_weight(tensors: dict[str, torch.Tensor | None], config: GptqConfig, out_features: int,
                in_features: int) -> AwqWeight:
    """One layer's GPTQ tensors (qweight, qzeros, scales, g_idx or None) as a grouped weight.

    Raises:
        CheckpointError: a tensor of the wrong shape, a bad g_idx, or none where act-order needs one.
    """
    bits = config.bits
    qweight, qzeros, scales, g_idx = (tensors[k] for k in ("qweight", "qzeros", "scales", "g_idx"))
    group = in_features if config.group_size == -1 else config.group_size
    n_groups = -(-in_features // group)
    expected = {"qweight": (in_features * bits // 32, out_features), "qzeros": (n_groups, out_features * bits // 32),
                "scales": (n_groups, out_features)}
    for name, tensor in (("qweight", qweight), ("qzeros", qzeros), ("scales", scales)):
        if tensor is None or tuple(tensor.shape) != expected[name]:
            got = "missing" if tensor is None else f"{tuple(tensor.shape)}"
            raise CheckpointError(f"GPTQ {name} is {got}; {bits}-bit groups of {group} over "
                                  f"[{out_features}, {in_features}] need {expected[name]}")
    if in_features % (32 // bits):
        raise CheckpointError(f"GPTQ input width {in_features} does not pack {32 // bits} values a word")
    if g_idx is None and config.desc_act:
        raise CheckpointError("GPTQ desc_act (act-order) is set but the layer has no g_idx to say the column order")
    if g_idx is not None and tuple(g_idx.shape) != (in_features,):
        raise CheckpointError(f"GPTQ g_idx is {tuple(g_idx.shape)}, the layer has {in_features} input columns")
    if not torch.isfinite(scales.float()).all():
        raise CheckpointError("GPTQ scales hold NaN or infinity")
    try:
        perm = grouped_order(g_idx, n_groups, group) if g_idx is not None else None
    except ValueError as exc:
        raise CheckpointError(f"GPTQ {exc}") from None
    q = unpack_rows(qweight, bits)  # [in, out]
    zeros = unpack_cols(qzeros, bits)  # [groups, out]
    if config.zeros_minus_one:
        zeros = ((zeros.to(torch.int32) + 1) & ((1 << bits) - 1)).to(torch.uint8)
    q = q.t() if perm is None else q.index_select(0, perm).t()
    if n_groups == 1 and group not in INT4_GROUPS:
        # Per channel: one scale for the whole row, repeated per group of a size the int4 kernel takes.
        group = next((g for g in (128, 64, 32) if in_features % g == 0), group)
        zeros, scales = zeros.expand(in_features // group, -1), scales.expand(in_features // group, -1)
    return AwqWeight(q.contiguous(), zeros.contiguous(), scales.contiguous(), group, perm, bits)

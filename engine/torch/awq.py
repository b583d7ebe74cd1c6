"""AWQ 4-bit GEMM weights: unpack, dequantize, and PyTorch's int4 matmul (CUDA, and the CPU when fp32 will not fit).

AWQ's GEMM layout stores W^T ([in, out]) with 8 four-bit values per int32 along `out`, in the
interleaved order 0, 2, 4, 6, 1, 3, 5, 7 (nibble i holds column AWQ_ORDER[i]); zero points
are packed the same way per group of `group_size` input rows; scales are [in / group, out].
A weight is (q - zero) * scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
# Column j of a packed group of 8 sits in nibble AWQ_REVERSE_ORDER[j].
AWQ_REVERSE_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)
# Group sizes `_weight_int4pack_mm` takes.
INT4_GROUPS = (32, 64, 128, 256)
_SHIFTS = torch.tensor([4 * AWQ_REVERSE_ORDER[j] for j in range(8)], dtype=torch.int32)


def unpack_awq(packed: torch.Tensor) -> torch.Tensor:
    """int32 [rows, cols / 8] in AWQ order -> uint8 [rows, cols] of values 0..15."""
    values = (packed.to(torch.int32).unsqueeze(-1) >> _SHIFTS.to(packed.device)) & 0xF
    return values.reshape(packed.shape[0], -1).to(torch.uint8)


def pack_awq(values: torch.Tensor) -> torch.Tensor:
    """uint8/int [rows, cols] of values 0..15 -> int32 [rows, cols / 8] in AWQ order (the inverse)."""
    v = values.to(torch.int32).reshape(values.shape[0], -1, 8)
    packed = torch.zeros(v.shape[:2], dtype=torch.int32, device=values.device)
    for i, col in enumerate(AWQ_ORDER):
        packed |= v[..., col] << (4 * i)
    return packed


@dataclass(slots=True)
class AwqWeight:
    """One linear layer's grouped integer weight (AWQ, or GPTQ once unpacked), in nn.Linear's [out, in]
    orientation: weight[:, perm[j]] = (q[:, j] - zero) * scale, with column j in group j // group_size.

    GPTQ's act-order checkpoints group the input columns in another order; `perm` (None: the identity)
    sorts them so each group is contiguous, as the int4 kernel needs, and the layer permutes its input
    the same way. The last group may be short (GPTQ allows widths that are no multiple of the group).
    """

    q: torch.Tensor  # uint8 [out, in], in the grouped column order
    zeros: torch.Tensor  # uint8 [groups, out]
    scales: torch.Tensor  # float [groups, out]
    group_size: int
    perm: torch.Tensor | None = None  # int64 [in]: input column of each grouped column
    bits: int = 4

    @classmethod
    def from_packed(cls, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group_size: int):
        q = unpack_awq(qweight)  # [in, out]
        zeros = unpack_awq(qzeros)  # [in / group, out]
        n_in, n_out = q.shape
        if n_in % group_size or zeros.shape != (n_in // group_size, n_out) or scales.shape != zeros.shape:
            raise ValueError(
                f"AWQ shapes do not agree: qweight {tuple(qweight.shape)}, qzeros {tuple(qzeros.shape)}, "
                f"scales {tuple(scales.shape)}, group size {group_size}"
            )
        return cls(q.t().contiguous(), zeros, scales, group_size)

    @property
    def out_features(self) -> int:
        return self.q.shape[0]

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The dense [out, in] weight, in the input's own column order."""
        n_in = self.q.shape[1]
        scale = self.scales.to(torch.float32).t().repeat_interleave(self.group_size, dim=1)[:, :n_in]
        zero = self.zeros.to(torch.float32).t().repeat_interleave(self.group_size, dim=1)[:, :n_in]
        grouped = (self.q.to(torch.float32) - zero) * scale
        if self.perm is None:
            return grouped.to(dtype)
        dense = torch.empty_like(grouped)
        dense[:, self.perm] = grouped
        return dense.to(dtype)

    @staticmethod
    def concat(parts: list[AwqWeight]) -> AwqWeight:
        """Fuse layers that share an input (q/k/v, gate/up) along the output dimension.

        Raises:
            ValueError: the parts group or order their input columns differently.
        """
        first = parts[0]
        for p in parts[1:]:
            same_perm = (p.perm is None) == (first.perm is None) and (p.perm is None or torch.equal(p.perm, first.perm))
            if p.group_size != first.group_size or p.bits != first.bits or not same_perm:
                raise ValueError("the layers group their input columns differently")
        return AwqWeight(
            torch.cat([p.q for p in parts], 0),
            torch.cat([p.zeros for p in parts], 1),
            torch.cat([p.scales for p in parts], 1),
            first.group_size,
            first.perm,
            first.bits,
        )


def int4_inner_k_tiles(in_features: int) -> int | None:
    """The inner-K tiling `_convert_weight_to_int4pack` accepts for this width, or None."""
    for tiles in (8, 4, 2):
        if in_features % (tiles * 16) == 0:
            return tiles
    return None


def tinygemm_scales_and_zeros(weight: AwqWeight) -> torch.Tensor:
    """[in / group, out, 2] of (scale, zero) for tinygemm, whose weight is (q - 8) * scale + zero."""
    scales = weight.scales.to(torch.float32)
    zeros = (8 - weight.zeros.to(torch.float32)) * scales
    return torch.stack([scales, zeros], dim=2)


class Int4Linear(torch.nn.Module):
    """x @ W^T with W held as int4 in the tinygemm layout of PyTorch's int4 matmul: `_weight_int4pack_mm`
    on CUDA, `_weight_int4pack_mm_for_cpu` on the CPU; activations go through it in bf16.

    tinygemm dequantizes (q - 8) * scale + zero, so AWQ's (q - z) * s becomes zero = (8 - z) * s.
    """

    def __init__(self, weight: AwqWeight, bias: torch.Tensor | None, device: torch.device):
        super().__init__()
        tiles = int4_inner_k_tiles(weight.q.shape[1])
        if (tiles is None or weight.out_features % 8 or weight.bits != 4 or weight.group_size not in INT4_GROUPS
                or weight.q.shape[1] % weight.group_size):
            raise ValueError("shape not supported by the int4 kernel")
        self.on_cuda = device.type == "cuda"
        if self.on_cuda:  # two values a byte, even columns in the high nibble
            q = weight.q.to(device)
            packed = torch.ops.aten._convert_weight_to_int4pack((q[:, ::2] << 4 | q[:, 1::2]).contiguous(), tiles)
        else:  # the CPU kernel packs from one int32 a value
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(weight.q.to(torch.int32), tiles)
        self.register_buffer("packed", packed)
        self.register_buffer(
            "scales_and_zeros", tinygemm_scales_and_zeros(weight).to(device, torch.bfloat16).contiguous()
        )
        self.register_buffer("bias", None if bias is None else bias.to(device, torch.bfloat16))
        self.register_buffer("perm", None if weight.perm is None else weight.perm.to(device))
        self.group_size = weight.group_size
        self.out_features = weight.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        if self.perm is not None:  # act-order GPTQ: the input's columns in the weight's grouped order
            x = x.index_select(-1, self.perm)
        mm = torch.ops.aten._weight_int4pack_mm if self.on_cuda else torch.ops.aten._weight_int4pack_mm_for_cpu
        y = mm(x.reshape(-1, shape[-1]).to(torch.bfloat16), self.packed, self.group_size, self.scales_and_zeros)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


class DenseLinear(torch.nn.Module):
    """A plain linear layer over a given weight (no init, no grad)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

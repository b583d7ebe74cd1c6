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
    """One linear layer's quantized weight, unpacked, in nn.Linear's [out, in] orientation."""

    q: torch.Tensor  # uint8 [out, in]
    zeros: torch.Tensor  # uint8 [in / group, out]
    scales: torch.Tensor  # float [in / group, out]
    group_size: int

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
        """The dense [out, in] weight."""
        scale = self.scales.to(torch.float32).t().repeat_interleave(self.group_size, dim=1)
        zero = self.zeros.to(torch.float32).t().repeat_interleave(self.group_size, dim=1)
        return ((self.q.to(torch.float32) - zero) * scale).to(dtype)

    @staticmethod
    def concat(parts: list[AwqWeight]) -> AwqWeight:
        """Fuse layers that share an input (q/k/v, gate/up) along the output dimension."""
        return AwqWeight(
            torch.cat([p.q for p in parts], 0),
            torch.cat([p.zeros for p in parts], 1),
            torch.cat([p.scales for p in parts], 1),
            parts[0].group_size,
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
        if tiles is None or weight.out_features % 8:
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
        self.group_size = weight.group_size
        self.out_features = weight.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
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


def make_linear(
    weight: torch.Tensor | AwqWeight,
    bias: torch.Tensor | None,
    device: torch.device,
    dtype: torch.dtype,
    int4: bool | None = None,
) -> torch.nn.Module:
    """The layer for this weight on this device. An AWQ weight runs in the int4 kernel when `int4`
    (default: on CUDA), else dequantized once to `dtype`; a shape the kernel refuses is dequantized."""
    if isinstance(weight, AwqWeight):
        if int4 if int4 is not None else device.type == "cuda":
            try:
                return Int4Linear(weight, bias, device)
            except (ValueError, RuntimeError):
                pass  # an odd shape: fall back to the dequantized weight
        weight = weight.dequantize(dtype)
    return DenseLinear(weight.to(device, dtype), None if bias is None else bias.to(device, dtype))

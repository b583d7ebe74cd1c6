"""FP8 checkpoints: float8_e4m3fn weights with a dequantization scale per tensor, per output channel, or
per block (DeepSeek/Qwen's `weight_scale_inv`, compressed-tensors' block strategy).

A weight is w_fp8 * scale, the scale broadcast over its block. On CUDA with compute capability 8.9 or
more the weight stays 8-bit and runs in `torch._scaled_mm` (activations quantized per row as they come,
the static `input_scale` some checkpoints carry is not used: per-row scales are at least as exact);
below 8.9 and on the CPU there is no FP8 matmul, so the loader upcasts the weight once (bf16 on CUDA,
fp32 on the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8).max)  # 448
# _scaled_mm wants K and N in multiples of 16, and (in practice) M too: rows are padded up to it.
_ALIGN = 16


class Fp8ScaleError(ValueError):
    """An FP8 scale of the wrong shape, or holding NaN, infinity, zero or a negative number."""


@dataclass(slots=True)
class Fp8Weight:
    """One layer's FP8 weight [out, in] and its scale: [1] per tensor, [out, 1] per channel, or
    [ceil(out / rows), ceil(in / cols)] per block of `block` = (rows, cols)."""

    weight: torch.Tensor  # float8_e4m3fn [out, in]
    scale: torch.Tensor  # float32
    block: tuple[int, int] | None

    @classmethod
    def checked(cls, weight: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] | None) -> Fp8Weight:
        """The weight with its scale brought to one of the three layouts; Fp8ScaleError when it fits none."""
        if weight.dtype != FP8:
            raise Fp8ScaleError(f"the weight is {weight.dtype}, not float8_e4m3fn")
        out, n_in = weight.shape
        s = scale.to(torch.float32)
        if block is not None:
            rows, cols = block
            want = (-(-out // rows), -(-n_in // cols))
            if tuple(s.shape) != want:
                raise Fp8ScaleError(f"the block scale is {tuple(s.shape)}; blocks of {rows}x{cols} over "
                                    f"[{out}, {n_in}] need {want}")
        elif s.numel() == 1:
            s = s.reshape(1)
        elif tuple(s.shape) in ((out,), (out, 1)):
            s = s.reshape(out, 1)
        else:
            raise Fp8ScaleError(f"the scale is {tuple(s.shape)}; a [{out}, {n_in}] weight needs one per tensor "
                                f"([1]) or per output channel ([{out}, 1])")
        if not torch.isfinite(s).all():
            raise Fp8ScaleError("the scale holds NaN or infinity")
        if not (s > 0).all():
            raise Fp8ScaleError("the scale holds zero or a negative number")
        if not torch.isfinite(weight.to(torch.float32)).all():
            raise Fp8ScaleError("the weight holds NaN")  # e4m3fn has no infinity; 0x7f/0xff are NaN
        return cls(weight, s, block)

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]

    def full_scale(self) -> torch.Tensor:
        """The scale of every element, [out, in] (or broadcastable to it)."""
        if self.block is None:
            return self.scale
        rows, cols = self.block
        out, n_in = self.weight.shape
        return self.scale.repeat_interleave(rows, 0)[:out].repeat_interleave(cols, 1)[:, :n_in]

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (self.weight.to(torch.float32) * self.full_scale()).to(dtype)

    def channel_scale(self) -> torch.Tensor | None:
        """The scale as one per output channel, [out, 1]; None for a block-wise scale."""
        return None if self.block is not None else self.scale.expand(self.out_features, 1).contiguous()

    @staticmethod
    def concat(parts: list[Fp8Weight]) -> Fp8Weight:
        """Fuse layers along the output dimension: per-tensor scales become per-channel (exact); block
        scales fuse when every part's rows fill whole blocks.

        Raises:
            ValueError: block-wise parts that cannot be fused, or a mix of block-wise and other scales.
        """
        weight = torch.cat([p.weight for p in parts], 0)
        if all(p.block is None for p in parts):
            return Fp8Weight(weight, torch.cat([p.channel_scale() for p in parts], 0), None)  # type: ignore[misc]
        block = parts[0].block
        if any(p.block != block or p.out_features % block[0] for p in parts):  # type: ignore[index]
            raise ValueError("the FP8 block scales of these layers cannot be fused")
        return Fp8Weight(weight, torch.cat([p.scale for p in parts], 0), block)


def fp8_matmul_available(device: torch.device) -> bool:
    """FP8 tensor cores: compute capability 8.9 (Ada) or more."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (FP8 [M, K], float32 [M, 1]) with x ~= q * scale, one scale per row."""
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)
    scale = amax / FP8_MAX
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


class Fp8Linear(torch.nn.Module):
    """x @ W^T with W kept FP8 on a compute capability >= 8.9 GPU, through `torch._scaled_mm`.

    _scaled_mm runs with unit scales and the row (activation) and column (weight channel) scales are
    applied to its output: y[m, n] = sx[m] * sw[n] * sum_k xq[m, k] wq[n, k] is the same product. A
    block-wise weight varies its scale along K too, so it is run as one product per block of columns.
    """

    def __init__(self, weight: Fp8Weight, bias: torch.Tensor | None, device: torch.device):
        super().__init__()
        out, n_in = weight.weight.shape
        if out % _ALIGN or n_in % _ALIGN or (weight.block is not None and weight.block[1] % _ALIGN):
            raise ValueError("shape not supported by _scaled_mm")
        # _scaled_mm takes its second operand column-major: W^T as a transposed view of W [out, in].
        self.register_buffer("weight", weight.weight.to(device))
        self.register_buffer("scale", weight.scale.to(device))
        self.register_buffer("bias", None if bias is None else bias.to(device, torch.bfloat16))
        self.register_buffer("one", torch.ones((), dtype=torch.float32, device=device))
        self.block = weight.block
        self.out_features = out
        self.forward(torch.zeros(1, n_in, device=device, dtype=torch.bfloat16))  # refuse here, not mid-chat

    def _mm(self, xq: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch._scaled_mm(xq, w.t(), scale_a=self.one, scale_b=self.one, out_dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, shape[-1])
        m = rows.shape[0]
        pad = -m % _ALIGN
        if pad:
            rows = F.pad(rows, (0, 0, 0, pad))
        xq, sx = quantize_rows(rows)
        if self.block is None:
            y = self._mm(xq, self.weight) * self.scale.t()
        else:
            r, c = self.block
            sw = self.scale.repeat_interleave(r, 0)[: self.out_features]  # [out, in / c]
            y = sum(self._mm(xq[:, k0:k0 + c].contiguous(), self.weight[:, k0:k0 + c]) * sw[:, j]
                    for j, k0 in enumerate(range(0, xq.shape[1], c)))
        y = (y * sx)[:m].to(torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)

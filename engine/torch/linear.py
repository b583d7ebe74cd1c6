"""The linear layer each kind of weight runs in, on each device."""

from __future__ import annotations

import logging

import torch

from engine.torch.awq import AwqWeight, DenseLinear, Int4Linear
from engine.torch.fp8 import Fp8Linear, Fp8Weight, fp8_matmul_available

log = logging.getLogger(__name__)

Weight = torch.Tensor | AwqWeight | Fp8Weight


def make_linear(
    weight: Weight,
    bias: torch.Tensor | None,
    device: torch.device,
    dtype: torch.dtype,
    int4: bool | None = None,
) -> torch.nn.Module:
    """The layer for this weight on this device.

    A 4-bit grouped weight (AWQ, GPTQ) runs in the int4 kernel when `int4` (default: on CUDA), else
    it is dequantized once to `dtype`, as is a shape the kernel refuses and 8-bit GPTQ (no int8 kernel).
    An FP8 weight stays 8-bit in `_scaled_mm` on compute capability >= 8.9, else it is upcast to `dtype`.
    """
    if isinstance(weight, AwqWeight):
        if weight.bits == 4 and (int4 if int4 is not None else device.type == "cuda"):
            try:
                return Int4Linear(weight, bias, device)
            except (ValueError, RuntimeError):
                pass  # an odd shape: fall back to the dequantized weight
        weight = weight.dequantize(dtype)
    elif isinstance(weight, Fp8Weight):
        if fp8_matmul_available(device):
            try:
                return Fp8Linear(weight, bias, device)
            except (ValueError, RuntimeError) as exc:  # an odd shape, or a torch without the kernel
                log.info("FP8 layer upcast to %s: %s", dtype, exc)
        weight = weight.dequantize(dtype)
    return DenseLinear(weight.to(device, dtype), None if bias is None else bias.to(device, dtype))


def fuse(weights: list[Weight], dtype: torch.dtype, device: torch.device) -> Weight:
    """Layers that share an input (q/k/v, gate/up) as one weight: still quantized when they are alike,
    else each dequantized to `dtype` and stacked."""
    kinds = {type(w) for w in weights}
    if kinds == {AwqWeight}:
        try:
            return AwqWeight.concat(weights)  # type: ignore[arg-type]
        except ValueError:
            pass
    if kinds == {Fp8Weight}:
        try:
            return Fp8Weight.concat(weights)  # type: ignore[arg-type]
        except ValueError:
            pass
    return torch.cat([w.to(device, dtype) if isinstance(w, torch.Tensor) else w.dequantize(dtype).to(device)
                      for w in weights])

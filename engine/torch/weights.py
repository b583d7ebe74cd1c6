"""One linear layer's weight read from a checkpoint, as its quantization stores it: dense, AWQ, GPTQ or FP8."""

from __future__ import annotations

import torch

from engine.torch.awq import AwqWeight
from engine.torch.checkpoint import TensorSource
from engine.torch.fp8 import FP8, Fp8ScaleError, Fp8Weight
from engine.torch.gptq import gptq_weight
from engine.torch.linear import Weight
from engine.torch.quant_config import AwqConfig, CheckpointError, Fp8Config, GptqConfig, QuantConfig

_SCALE_NAMES = ("weight_scale_inv", "weight_scale")


def read_weight(source: TensorSource, quant: QuantConfig | None, prefix: str, out_features: int,
                in_features: int) -> Weight | None:
    """The quantized weight of `prefix` as stored (shapes checked), or None when it is a dense one.

    Raises:
        CheckpointError: quantized tensors the config does not explain, or of the wrong shape or values.
    """
    shape = (out_features, in_features)
    if f"{prefix}.qweight" in source:
        if isinstance(quant, AwqConfig):
            return _awq(source, quant, prefix, shape)
        if isinstance(quant, GptqConfig):
            tensors = {k: source.get(f"{prefix}.{k}") if f"{prefix}.{k}" in source else None
                       for k in ("qweight", "qzeros", "scales", "g_idx")}
            try:
                return gptq_weight(tensors, quant, out_features, in_features)
            except CheckpointError as exc:
                raise CheckpointError(f"{prefix}: {exc}") from None
        raise CheckpointError(f"{prefix} is packed (qweight) but config.json names no AWQ or GPTQ quantization")
    weight = source.get(f"{prefix}.weight")
    if weight.dtype != FP8:
        return None
    if not isinstance(quant, Fp8Config):
        raise CheckpointError(f"{prefix}.weight is FP8 but config.json names no FP8 quantization")
    if tuple(weight.shape) != shape:
        raise CheckpointError(f"{prefix}: FP8 weight is {tuple(weight.shape)}, the config implies {shape}")
    names = (quant.scale_name, *(n for n in _SCALE_NAMES if n != quant.scale_name))
    scale_name = next((f"{prefix}.{n}" for n in names if f"{prefix}.{n}" in source), None)
    if scale_name is None:
        raise CheckpointError(f"{prefix}: FP8 weight without a scale ({prefix}.{quant.scale_name} is missing)")
    try:
        return Fp8Weight.checked(weight, source.get(scale_name), quant.block)
    except Fp8ScaleError as exc:
        raise CheckpointError(f"{scale_name}: {exc}") from None


def _awq(source: TensorSource, quant: AwqConfig, prefix: str, shape: tuple[int, int]) -> AwqWeight:
    try:
        weight = AwqWeight.from_packed(source.get(f"{prefix}.qweight"), source.get(f"{prefix}.qzeros"),
                                       source.get(f"{prefix}.scales"), quant.group_size)
    except ValueError as exc:
        raise CheckpointError(f"{prefix}: {exc}") from None
    if tuple(weight.q.shape) != shape:
        raise CheckpointError(f"{prefix}: AWQ weight is {tuple(weight.q.shape)}, the config implies {shape}")
    return weight


def dtype_for(quant: QuantConfig | None, stored: str) -> torch.dtype:
    """The compute dtype on CUDA: bf16 for the int4 and FP8 kernels, else the dtype the weights are stored in."""
    if quant is not None:
        return torch.bfloat16
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(stored, torch.bfloat16)

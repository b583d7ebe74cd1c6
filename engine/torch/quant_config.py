"""A checkpoint's `quantization_config`, read into what the loader needs: AWQ, GPTQ or FP8, or a refusal.

Torch-free like model_config. Every refusal is one CheckpointError whose message names the setting:
a bit width, a group size, a format version, a packing the engine does not read.
"""

from __future__ import annotations

from dataclasses import dataclass


class CheckpointError(Exception):
    """The model directory cannot be used; the message says why, in words a user can act on."""


AWQ_GROUP_SIZES = (32, 64, 128)
# -1 is GPTQ's per-channel (one group spanning the whole input).
GPTQ_GROUP_SIZES = (32, 64, 128, -1)
GPTQ_BITS = (4, 8)
# "gptq" (v1) stores every zero point minus one; "gptq_v2" (GPTQModel) stores it as it is.
GPTQ_FORMATS = ("gptq", "gptq_v2")


@dataclass(frozen=True, slots=True)
class AwqConfig:
    group_size: int
    bits: int = 4
    modules_to_not_convert: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GptqConfig:
    bits: int
    group_size: int  # -1: per channel
    desc_act: bool  # act-order: g_idx permutes the input columns, and must be in the file
    sym: bool
    zeros_minus_one: bool  # the v1 checkpoint format


@dataclass(frozen=True, slots=True)
class Fp8Config:
    """float8_e4m3fn weights; `block` is (rows, cols) of one scale's block, or None for a per-tensor
    or per-channel scale (the tensor's shape tells which)."""

    block: tuple[int, int] | None
    scale_name: str  # "weight_scale_inv" (DeepSeek/Qwen block-wise) or "weight_scale"
    ignored: tuple[str, ...] = ()  # module names kept dense (compressed-tensors' "ignore")


QuantConfig = AwqConfig | GptqConfig | Fp8Config


def parse_quantization(quant: object, where: str) -> QuantConfig | None:
    """The config's quantization, or None when dense; CheckpointError for what the engine cannot run."""
    if not quant:
        return None
    if not isinstance(quant, dict):
        raise CheckpointError(f"{where}: quantization_config is not an object")
    method = str(quant.get("quant_method", "")).lower()
    if method == "awq":
        return _awq(quant, where)
    if method == "gptq":
        return _gptq(quant, where)
    if method == "fp8":
        return _fp8(quant, where)
    if method == "compressed-tensors":
        return _compressed_tensors(quant, where)
    raise CheckpointError(f"{where}: quantization {method or 'unknown'!r} is not supported (AWQ, GPTQ or FP8)")


def _int(quant: dict, where: str, *keys: str, default: int) -> int:
    for key in keys:
        if key in quant:
            value = quant[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise CheckpointError(f"{where}: quantization_config {key} is {value!r}, not a whole number")
            return value
    return default


def _awq(quant: dict, where: str) -> AwqConfig:
    version = str(quant.get("version", "gemm")).lower()
    bits = _int(quant, where, "bits", "w_bit", default=4)
    group = _int(quant, where, "group_size", "q_group_size", default=128)
    if version != "gemm":
        raise CheckpointError(f"{where}: AWQ version {version!r} is not supported (only GEMM)")
    if bits != 4:
        raise CheckpointError(f"{where}: {bits}-bit AWQ is not supported (only 4-bit)")
    if group not in AWQ_GROUP_SIZES:
        raise CheckpointError(f"{where}: AWQ group size {group} is not supported (32, 64 or 128)")
    skip = tuple(str(m) for m in quant.get("modules_to_not_convert") or ())
    return AwqConfig(group_size=group, bits=bits, modules_to_not_convert=skip)


def _gptq(quant: dict, where: str) -> GptqConfig:
    bits = _int(quant, where, "bits", default=4)
    if bits not in GPTQ_BITS:
        raise CheckpointError(f"{where}: {bits}-bit GPTQ is not supported (only 4-bit and 8-bit)")
    group = _int(quant, where, "group_size", default=128)
    if group not in GPTQ_GROUP_SIZES:
        raise CheckpointError(f"{where}: GPTQ group size {group} is not supported (32, 64, 128 or -1)")
    fmt = str(quant.get("checkpoint_format") or ("marlin" if quant.get("is_marlin_format") else "gptq")).lower()
    if fmt not in GPTQ_FORMATS:
        raise CheckpointError(f"{where}: GPTQ checkpoint format {fmt!r} is not supported (gptq or gptq_v2)")
    if quant.get("dynamic"):
        raise CheckpointError(f"{where}: per-module GPTQ settings ('dynamic') are not supported")
    return GptqConfig(bits=bits, group_size=group, desc_act=bool(quant.get("desc_act", False)),
                      sym=bool(quant.get("sym", True)), zeros_minus_one=fmt == "gptq")


def _fp8(quant: dict, where: str) -> Fp8Config:
    fmt = str(quant.get("fmt", "e4m3")).lower()
    if fmt != "e4m3":
        raise CheckpointError(f"{where}: FP8 format {fmt!r} is not supported (only e4m3)")
    block = quant.get("weight_block_size")
    ignored = tuple(str(m) for m in quant.get("modules_to_not_convert") or ())
    if block is None:
        return Fp8Config(block=None, scale_name="weight_scale", ignored=ignored)
    return Fp8Config(block=_block(block, where), scale_name="weight_scale_inv", ignored=ignored)


def _block(block: object, where: str) -> tuple[int, int]:
    if (not isinstance(block, list) or len(block) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise CheckpointError(f"{where}: FP8 weight_block_size {block!r} is not two positive whole numbers")
    return block[0], block[1]


def _compressed_tensors(quant: dict, where: str) -> Fp8Config:
    """compressed-tensors checkpoints: only FP8 weights ("float-quantized"), one scheme for every layer."""
    fmt = str(quant.get("format", "")).lower()
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        raise CheckpointError(f"{where}: compressed-tensors needs exactly one config group, not {groups!r}")
    weights = next(iter(groups.values())).get("weights") if isinstance(next(iter(groups.values())), dict) else None
    if not isinstance(weights, dict):
        raise CheckpointError(f"{where}: compressed-tensors config group has no weights scheme")
    kind, bits = str(weights.get("type", "")).lower(), weights.get("num_bits")
    if kind != "float" or bits != 8 or fmt not in ("float-quantized", "naive-quantized"):
        raise CheckpointError(f"{where}: compressed-tensors {fmt or 'unknown'!r} with {bits}-bit {kind or '?'} "
                              "weights is not supported (only FP8 float-quantized)")
    strategy = str(weights.get("strategy", "tensor")).lower()
    ignored = tuple(str(m) for m in quant.get("ignore") or ())
    if strategy in ("tensor", "channel"):
        return Fp8Config(block=None, scale_name="weight_scale", ignored=ignored)
    if strategy == "block":
        return Fp8Config(block=_block(weights.get("block_structure"), where), scale_name="weight_scale",
                         ignored=ignored)
    raise CheckpointError(f"{where}: compressed-tensors FP8 strategy {strategy!r} is not supported "
                          "(tensor, channel or block)")

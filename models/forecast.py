"""Memory forecast of a GGUF model under given settings, per device, before loading it.

The parts follow what llama.cpp allocates (and logs as "model/KV/compute buffer size"):
- weights: the real tensor sizes from the header, per layer, placed where llama.cpp
  places them (the token embedding stays on the CPU; the last `n_gpu_layers` repeating
  layers go to the GPU, the output layer too once every repeating layer is there);
- KV cache: per layer, K and V rows of `head_dim x n_kv_heads` in the KV type, over the
  context padded as llama.cpp pads it; sliding-window layers hold only their window;
- compute: the largest set of intermediate tensors one ubatch needs (the logits of a
  full ubatch, or without flash attention the attention scores and mask if larger).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

# Bytes per element of the KV cache types llama.cpp offers (block size / type size).
KV_TYPE_BYTES: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q5_0": 22 / 32}
# llama.cpp rounds the KV cache length up to a multiple of this.
KV_PADDING = 256
# Besides the largest tensor, about this many (n_embd x ubatch) f32 activations are live
# at the peak (residual stream, norms, projections): fitted to llama.cpp's own reports.
_LIVE_ACTIVATIONS = 4
_BLK = re.compile(r"^blk\.(\d+)\.")


@dataclass(slots=True, frozen=True)
class ModelShape:
    """What the forecast needs to know of a model; built from a header."""

    n_layers: int
    n_embd: int
    n_heads: int
    n_kv_heads: tuple[int, ...]  # per layer
    head_dim_k: int
    head_dim_v: int
    n_vocab: int
    n_ctx_train: int
    swa_layers: tuple[bool, ...]  # per layer: True where attention uses a sliding window
    sliding_window: int | None
    layer_weight_bytes: tuple[int, ...]  # per repeating layer
    input_weight_bytes: int  # token embedding: always on the CPU
    output_weight_bytes: int  # output norm + output projection
    # No output projection of its own: llama.cpp reuses the token embedding, and copies it
    # to the GPU when the output layer goes there.
    output_tied: bool = False
    n_ff: int = 0  # FFN width (widest layer); the paged engine's activation peak depends on it


@dataclass(slots=True, frozen=True)
class ForecastSettings:
    n_ctx: int
    kv_type: str = "f16"
    flash_attn: bool = True
    n_batch: int = 512
    n_ubatch: int = 512
    n_gpu_layers: int = 0  # 0: CPU only; > n_layers: everything, output layer included
    n_seq: int = 1
    # Set for the PyTorch engine (AWQ/FP8 checkpoints): its KV cache is a pool of blocks of
    # this many tokens, and it computes logits only for the last token of each sequence.
    paged_block_size: int | None = None


@dataclass(slots=True, frozen=True)
class DeviceForecast:
    weights_bytes: int = 0
    kv_cache_bytes: int = 0
    compute_bytes: int = 0
    overhead_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.compute_bytes + self.overhead_bytes

    def to_dict(self) -> dict[str, int]:
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "compute_bytes": self.compute_bytes,
            "overhead_bytes": self.overhead_bytes,
            "total_bytes": self.total_bytes,
        }


@dataclass(slots=True, frozen=True)
class Forecast:
    settings: ForecastSettings
    devices: dict[str, DeviceForecast] = field(default_factory=dict)

    def total(self, part: str) -> int:
        return sum(getattr(d, part) for d in self.devices.values())

    def to_dict(self) -> dict:
        parts = ("weights_bytes", "kv_cache_bytes", "compute_bytes", "overhead_bytes", "total_bytes")
        return {**{p: self.total(p) for p in parts}, "devices": {n: d.to_dict() for n, d in self.devices.items()}}


def padded_context(n_ctx: int) -> int:
    return -(-n_ctx // KV_PADDING) * KV_PADDING


def kv_cells(shape: ModelShape, layer: int, s: ForecastSettings) -> int:
    """KV cells a layer keeps: the padded context, or a sliding window plus one ubatch."""
    pad = padded_context if s.paged_block_size is None else lambda n: -(-n // s.paged_block_size) * s.paged_block_size
    n_ctx = pad(s.n_ctx * (s.n_seq if s.paged_block_size else 1))
    if shape.swa_layers[layer] and shape.sliding_window:
        return min(n_ctx, pad(shape.sliding_window * s.n_seq + s.n_ubatch))
    return n_ctx


def kv_layer_bytes(shape: ModelShape, layer: int, s: ForecastSettings) -> int:
    if s.kv_type not in KV_TYPE_BYTES:
        raise ValueError(f"unknown KV cache type {s.kv_type!r}; use one of {', '.join(KV_TYPE_BYTES)}")
    per_elem = KV_TYPE_BYTES[s.kv_type]
    n_kv = shape.n_kv_heads[layer]
    row = shape.head_dim_k * n_kv * per_elem + shape.head_dim_v * n_kv * per_elem
    return int(row * kv_cells(shape, layer, s))


def compute_bytes(shape: ModelShape, s: ForecastSettings, with_logits: bool = True) -> int:
    """The largest live set of one ubatch's graph (f32 activations)."""
    n_ubatch = min(s.n_ubatch, s.n_batch, s.n_ctx)
    if s.paged_block_size is not None:
        # PyTorch engine, fp16 activations of one prefill chunk: the residual stream, q/k/v and
        # the FFN's gate, up and product; logits (fp32) for one token per sequence.
        n_ff = shape.n_ff or 4 * shape.n_embd
        activations = n_ubatch * (4 * shape.n_embd + 3 * n_ff) * 2
        return activations + (shape.n_vocab * s.n_seq * 4 if with_logits else 0)
    logits = shape.n_vocab * n_ubatch * 4 if with_logits else 0
    attention = 0
    if not s.flash_attn:
        # scores (heads x cells x ubatch) and the mask (cells x ubatch), both f32
        cells = max(kv_cells(shape, i, s) for i in range(shape.n_layers))
        attention = cells * n_ubatch * (shape.n_heads + 1) * 4
    return max(logits, attention) + _LIVE_ACTIVATIONS * shape.n_embd * n_ubatch * 4


def forecast(shape: ModelShape, settings: ForecastSettings, gpu: str = "cuda:0") -> Forecast:
    """Bytes per device for `shape` under `settings`; the GPU is named `gpu` when layers go there."""
    n_gpu = max(0, min(settings.n_gpu_layers, shape.n_layers + 1))
    first_gpu_layer = shape.n_layers - min(n_gpu, shape.n_layers)
    parts: dict[str, dict[str, int]] = {"cpu": _zero()}
    if n_gpu:
        parts[gpu] = _zero()
    for i in range(shape.n_layers):
        device = gpu if i >= first_gpu_layer and n_gpu else "cpu"
        parts[device]["weights_bytes"] += shape.layer_weight_bytes[i]
        parts[device]["kv_cache_bytes"] += kv_layer_bytes(shape, i, settings)
    parts["cpu"]["weights_bytes"] += shape.input_weight_bytes
    out_device = gpu if n_gpu > shape.n_layers else "cpu"
    parts[out_device]["weights_bytes"] += shape.output_weight_bytes
    if shape.output_tied and out_device != "cpu":
        parts[out_device]["weights_bytes"] += shape.input_weight_bytes
    # The logits are computed where the output layer is; every device running layers
    # needs room for one ubatch's attention and activations.
    for device in parts:
        parts[device]["compute_bytes"] += compute_bytes(shape, settings, with_logits=device == out_device)
    return Forecast(settings, {name: DeviceForecast(**p) for name, p in parts.items()})


def scaled_to(shape: ModelShape, weights_bytes: int) -> ModelShape:
    """The same model at another quantization: every part scaled to a total of `weights_bytes`.

    Used for the other files of a repo, whose headers need not all be fetched: within one
    repo the files differ in tensor types only.
    """
    total = sum(shape.layer_weight_bytes) + shape.input_weight_bytes + shape.output_weight_bytes
    k = weights_bytes / total if total else 0.0
    return replace(
        shape,
        layer_weight_bytes=tuple(int(b * k) for b in shape.layer_weight_bytes),
        input_weight_bytes=int(shape.input_weight_bytes * k),
        output_weight_bytes=int(shape.output_weight_bytes * k),
    )


def shape_from_gguf(header) -> ModelShape:  # noqa: ANN001 - models.gguf_header.GgufHeader
    """The forecast's view of a GGUF header: dimensions and per-layer tensor bytes.

    Raises:
        ValueError: the header lacks a dimension the forecast needs.
    """
    needed = ("n_layers", "n_embd", "n_heads", "n_kv_heads", "head_dim_k", "head_dim_v", "n_vocab")
    missing = [name for name in needed if getattr(header, name) is None]
    if missing:
        raise ValueError(f"{header.source}: the header lacks {', '.join(missing)}; cannot forecast its memory")
    n_layers = header.n_layers
    layer_bytes = [0] * n_layers
    input_bytes = output_bytes = 0
    has_output = False
    for tensor in header.tensors:
        match = _BLK.match(tensor.name)
        if match and int(match.group(1)) < n_layers:
            layer_bytes[int(match.group(1))] += tensor.nbytes
        elif tensor.name.startswith("token_embd"):
            input_bytes += tensor.nbytes
        else:
            has_output |= tensor.name.startswith("output.")
            output_bytes += tensor.nbytes
    return ModelShape(
        n_layers=n_layers,
        n_embd=header.n_embd,
        n_heads=_widest(header.n_heads),
        n_kv_heads=_per_layer(header.n_kv_heads, n_layers),
        head_dim_k=header.head_dim_k,
        head_dim_v=header.head_dim_v,
        n_vocab=header.n_vocab,
        n_ctx_train=header.n_ctx_train or 0,
        swa_layers=tuple(header.swa_layers or (False,) * n_layers),
        sliding_window=header.sliding_window,
        layer_weight_bytes=tuple(layer_bytes),
        input_weight_bytes=input_bytes,
        output_weight_bytes=output_bytes,
        output_tied=not has_output,
        n_ff=_widest(header.n_ff or 0),
    )


def _per_layer(value: int | tuple[int, ...], n_layers: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, tuple | list) else (value,) * n_layers


def _widest(value: int | tuple[int, ...]) -> int:
    return max(value) if isinstance(value, tuple | list) else value


def _zero() -> dict[str, int]:
    return {"weights_bytes": 0, "kv_cache_bytes": 0, "compute_bytes": 0, "overhead_bytes": 0}

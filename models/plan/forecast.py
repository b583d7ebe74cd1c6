"""Memory forecast of a GGUF model under given settings, per device, before loading it.

The parts follow what llama.cpp allocates (and logs as "model/KV/compute buffer size"):
- weights: the real tensor sizes from the header, per layer, placed where llama.cpp
  places them (models/plan/layer_split.py: the token embedding stays on the CPU; the output layer
  goes to the GPU first, then the last repeating layers; with several GPUs the layers are
  dealt out by `tensor_split`, and the output layer goes to the last one);
- KV cache: per layer, K and V rows of `head_dim x n_kv_heads` in the KV type, over the
  context padded as llama.cpp pads it; sliding-window layers hold the whole context too (the
  engine asks for llama.cpp's full-size SWA cache, which keeps prefixes reusable) unless the
  plan turns `swa_full` off, and then only their window plus one ubatch;
- CPU repack: on the CPU, llama.cpp copies the matrix weights of some quantized types into a
  second buffer in its own layout (models/plan/cpu_repack.py); that copy is counted as weights;
- compute: the largest set of intermediate tensors one ubatch needs (the logits of a
  full ubatch, or without flash attention the attention scores and mask if larger).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from models.formats.embedding_models import EMBED_BATCH_INPUTS, is_embedding_model, is_encoder
from models.formats.quant_mix import estimated_layer_parts, estimated_output_type
from models.plan.cpu_repack import parts_by_type
from models.plan.layer_split import PIPELINE_COPIES, layer_devices, pipeline_parallel

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
    # Bytes of the matrix weights llama.cpp could repack on the CPU, by ggml type: per repeating
    # layer, of the output projection, and of the token embedding (repacked as the output when tied).
    layer_repack: tuple[tuple[tuple[int, int], ...], ...] = ()
    output_repack: tuple[tuple[int, int], ...] = ()
    input_repack: tuple[tuple[int, int], ...] = ()
    quant: str | None = None  # the quantization of the file the shape was read from
    # An embedding model (models/formats/embedding_models.py): its context takes all its tokens in one ubatch.
    # An encoder among them (BERT and kin) keeps no KV cache and computes no logits.
    embedding: bool = False
    encoder: bool = False


@dataclass(slots=True, frozen=True)
class ForecastSettings:
    n_ctx: int
    kv_type: str = "f16"
    flash_attn: bool = True
    n_batch: int = 512
    n_ubatch: int = 512
    n_gpu_layers: int = 0  # 0: CPU only; > n_layers: everything, output layer included
    n_seq: int = 1
    # Set for the PyTorch engine (AWQ/GPTQ/FP8 checkpoints): its KV cache is a pool of blocks of
    # this many tokens, and it computes logits only for the last token of each sequence.
    paged_block_size: int | None = None
    # llama.cpp's full-size cache for sliding-window layers (its default, and the engine's); off,
    # those layers keep only their window, which saves memory but not prefixes older than it.
    swa_full: bool = True
    # ggml types the CPU backend repacks (models.plan.cpu_repack.repack_types); empty: none.
    repack_types: frozenset[int] = frozenset()
    # llama.cpp's tensor_split: each GPU's share of the GPU layers, in llama.cpp's device order
    # (models/plan/layer_split.py); empty: one GPU.
    tensor_split: tuple[float, ...] = ()


@dataclass(slots=True, frozen=True)
class DeviceForecast:
    weights_bytes: int = 0
    kv_cache_bytes: int = 0
    compute_bytes: int = 0
    overhead_bytes: int = 0
    projector_bytes: int = 0  # a multimodal projector's weights and compute buffer (projector_forecast.py)

    @property
    def total_bytes(self) -> int:
        return (self.weights_bytes + self.kv_cache_bytes + self.compute_bytes + self.overhead_bytes
                + self.projector_bytes)

    def to_dict(self) -> dict[str, int]:
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "compute_bytes": self.compute_bytes,
            "overhead_bytes": self.overhead_bytes,
            "projector_bytes": self.projector_bytes,
            "total_bytes": self.total_bytes,
        }


@dataclass(slots=True, frozen=True)
class Forecast:
    settings: ForecastSettings
    devices: dict[str, DeviceForecast] = field(default_factory=dict)

    def total(self, part: str) -> int:
        return sum(getattr(d, part) for d in self.devices.values())

    def to_dict(self) -> dict:
        parts = ("weights_bytes", "kv_cache_bytes", "compute_bytes", "overhead_bytes", "projector_bytes", "total_bytes")
        return {**{p: self.total(p) for p in parts}, "devices": {n: d.to_dict() for n, d in self.devices.items()}}


def padded_context(n_ctx: int) -> int:
    return -(-n_ctx // KV_PADDING) * KV_PADDING


def kv_cells(shape: ModelShape, layer: int, s: ForecastSettings) -> int:
    """KV cells a layer keeps: the padded context, or (without `swa_full`) a sliding window plus one ubatch."""
    pad = padded_context if s.paged_block_size is None else lambda n: -(-n // s.paged_block_size) * s.paged_block_size
    n_ctx = pad(s.n_ctx * (s.n_seq if s.paged_block_size else 1))
    if shape.swa_layers[layer] and shape.sliding_window and not (s.swa_full and s.paged_block_size is None):
        n_ubatch = min(s.n_ubatch, s.n_batch)
        return pad(min(n_ctx, shape.sliding_window * s.n_seq + n_ubatch))
    return n_ctx


def repack_bytes(parts: tuple[tuple[int, int], ...], s: ForecastSettings) -> int:
    """Bytes of `parts` ((ggml type, bytes) pairs) that the CPU backend repacks under `s`."""
    return sum(n for type_id, n in parts if type_id in s.repack_types)


def kv_layer_bytes(shape: ModelShape, layer: int, s: ForecastSettings) -> int:
    if s.kv_type not in KV_TYPE_BYTES:
        raise ValueError(f"unknown KV cache type {s.kv_type!r}; use one of {', '.join(KV_TYPE_BYTES)}")
    if shape.encoder:
        return 0  # llama.cpp makes no memory for an encoder
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


def embedding_compute_bytes(shape: ModelShape, s: ForecastSettings, with_logits: bool = True) -> int:
    """An embedding context's compute buffer, for one ubatch of its whole context.

    A causal model's graph computes its output layer for every token (compute_bytes: the logits of a full
    ubatch); an encoder's computes none, and holds the FFN's activations and, over the ubatch's own tokens,
    flash attention's f16 mask or else the scores of every head and the f32 mask. With the output buffer
    (embedding_output_bytes), fitted to llama.cpp's own buffers (tests/models/plan/test_embedding_forecast.py):
    a few percent over them, never under.
    """
    if not shape.encoder:
        return compute_bytes(shape, s, with_logits)
    n_ubatch = min(s.n_ubatch, s.n_batch, s.n_ctx)
    n_ff = shape.n_ff or 4 * shape.n_embd
    attention = n_ubatch * n_ubatch * (2 if s.flash_attn else (shape.n_heads + 1) * 4)
    return attention + n_ubatch * (n_ff + 4 * shape.n_embd) * 4


def embedding_output_bytes(shape: ModelShape) -> int:
    """An embedding context's output buffer, in host memory: a row of logits and a vector per sequence."""
    return EMBED_BATCH_INPUTS * (shape.n_vocab + shape.n_embd) * 4


def forecast(shape: ModelShape, settings: ForecastSettings, gpu: str = "cuda:0") -> Forecast:
    """Bytes per device for `shape` under `settings`, each layer where llama.cpp puts it.

    The GPU is named `gpu`; with several in `settings.tensor_split`, the i-th is named by `gpu`'s
    prefix and i ("cuda:0", "cuda:1", ...), as the engine's memory report names llama.cpp's devices.
    """
    split = settings.tensor_split
    names = (gpu,) if len(split) <= 1 else tuple(f"{gpu.rstrip('0123456789')}{i}" for i in range(len(split)))
    placed = [("cpu" if d is None else names[d]) for d in layer_devices(shape.n_layers, settings.n_gpu_layers, split)]
    parts: dict[str, dict[str, int]] = {"cpu": _zero()}
    for i in range(shape.n_layers):
        device = parts.setdefault(placed[i], _zero())
        device["weights_bytes"] += shape.layer_weight_bytes[i]
        device["kv_cache_bytes"] += kv_layer_bytes(shape, i, settings)
    parts["cpu"]["weights_bytes"] += shape.input_weight_bytes
    out_device = placed[shape.n_layers]
    parts.setdefault(out_device, _zero())["weights_bytes"] += shape.output_weight_bytes
    if shape.output_tied and out_device != "cpu":
        parts[out_device]["weights_bytes"] += shape.input_weight_bytes
    n_cpu_layers = placed[:shape.n_layers].count("cpu")  # always the first ones
    parts["cpu"]["weights_bytes"] += cpu_repack_bytes(shape, settings, n_cpu_layers, output_on_cpu=out_device == "cpu")
    # The logits are computed where the output layer is; every device running layers
    # needs room for one ubatch's attention and activations.
    compute = embedding_compute_bytes if shape.embedding else compute_bytes
    for device in parts:
        parts[device]["compute_bytes"] += compute(shape, settings, with_logits=device == out_device)
    if shape.embedding:
        parts["cpu"]["compute_bytes"] += embedding_output_bytes(shape)
    if pipeline_parallel(shape.n_layers, settings.n_gpu_layers, split):
        gpu_copies, cpu_copies = pipeline_copy_bytes(shape, settings)
        for device in parts:
            parts[device]["compute_bytes"] += cpu_copies if device == "cpu" else gpu_copies
    return Forecast(settings, {name: DeviceForecast(**p) for name, p in parts.items()})


def pipeline_copy_bytes(shape: ModelShape, s: ForecastSettings) -> tuple[int, int]:
    """The inputs ggml's scheduler keeps PIPELINE_COPIES of under pipeline parallelism: (per GPU, CPU) bytes.

    Each GPU's part of the graph takes in one ubatch's hidden state (f32) from the device before it
    and the attention masks (f16 with flash attention, else f32; one per kind of layer, over its KV
    cells), which the CPU builds (ggml-backend.cpp, split inputs and graph inputs). Without pipeline
    parallelism these are one short-lived copy, already in compute_bytes; here every copy stays.
    """
    n_ubatch = min(s.n_ubatch, s.n_batch, s.n_ctx)
    kinds: dict[bool, int] = {}
    for i in range(shape.n_layers):
        kinds[shape.swa_layers[i]] = max(kinds.get(shape.swa_layers[i], 0), kv_cells(shape, i, s))
    masks = sum(kinds.values()) * n_ubatch * (2 if s.flash_attn else 4)
    hidden = shape.n_embd * n_ubatch * 4
    return PIPELINE_COPIES * (hidden + masks), (PIPELINE_COPIES - 1) * masks


def cpu_repack_bytes(shape: ModelShape, s: ForecastSettings, n_cpu_layers: int, output_on_cpu: bool) -> int:
    """The CPU's repacked copies: of the first `n_cpu_layers` layers, and of the output layer if it stays.

    A tied output reuses the token embedding, which llama.cpp then loads a second time as the
    output matrix (the embedding itself is only looked up, never repacked).
    """
    layers = sum(repack_bytes(parts, s) for parts in shape.layer_repack[:n_cpu_layers])
    output = shape.input_repack if shape.output_tied else shape.output_repack
    return layers + (repack_bytes(output, s) if output_on_cpu else 0)


def scaled_to(shape: ModelShape, weights_bytes: int, quant: str | None = None) -> ModelShape:
    """The same model at another quantization: every part scaled to a total of `weights_bytes`.

    Used for the other files of a repo, whose headers need not all be fetched: within one
    repo the files differ in tensor types only. When `quant` differs from the level the shape
    was read at, the type mix of its layers (what the CPU repacks) is llama.cpp's usual one.
    """
    total = sum(shape.layer_weight_bytes) + shape.input_weight_bytes + shape.output_weight_bytes
    k = weights_bytes / total if total else 0.0
    layers = tuple(int(b * k) for b in shape.layer_weight_bytes)
    input_bytes, output_bytes = int(shape.input_weight_bytes * k), int(shape.output_weight_bytes * k)
    if quant is None or quant == shape.quant:
        def scale(parts: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
            return tuple((t, int(n * k)) for t, n in parts)

        repack = {"layer_repack": tuple(scale(p) for p in shape.layer_repack),
                  "output_repack": scale(shape.output_repack), "input_repack": scale(shape.input_repack)}
    else:
        out_type = estimated_output_type(quant)
        repack = {"layer_repack": tuple(estimated_layer_parts(quant, b) for b in layers),
                  "output_repack": ((out_type, output_bytes),) if out_type is not None else (),
                  "input_repack": ((out_type, input_bytes),) if out_type is not None else (), "quant": quant}
    return replace(shape, layer_weight_bytes=layers, input_weight_bytes=input_bytes,
                   output_weight_bytes=output_bytes, **repack)


def shape_from_gguf(header) -> ModelShape:  # noqa: ANN001 - models.formats.gguf_header.GgufHeader
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
    layer_tensors: list[list] = [[] for _ in range(n_layers)]
    input_tensors, output_tensors = [], []
    input_bytes = output_bytes = 0
    has_output = False
    for tensor in header.tensors:
        match = _BLK.match(tensor.name)
        if match and int(match.group(1)) < n_layers:
            layer_bytes[int(match.group(1))] += tensor.nbytes
            layer_tensors[int(match.group(1))].append(tensor)
        elif tensor.name.startswith("token_embd"):
            input_bytes += tensor.nbytes
            input_tensors.append(tensor)
        else:
            has_output |= tensor.name.startswith("output.")
            output_bytes += tensor.nbytes
            output_tensors.append(tensor)
    encoder = is_encoder(header.metadata)
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
        output_tied=not has_output and not encoder,  # an encoder has no output layer at all
        n_ff=_widest(header.n_ff or 0),
        layer_repack=tuple(parts_by_type(ts) for ts in layer_tensors),
        output_repack=parts_by_type(output_tensors),
        input_repack=parts_by_type(input_tensors),
        quant=header.quant_name,
        embedding=is_embedding_model(header.metadata),
        encoder=encoder,
    )


def _per_layer(value: int | tuple[int, ...], n_layers: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, tuple | list) else (value,) * n_layers


def _widest(value: int | tuple[int, ...]) -> int:
    return max(value) if isinstance(value, tuple | list) else value


def _zero() -> dict[str, int]:
    return {"weights_bytes": 0, "kv_cache_bytes": 0, "compute_bytes": 0, "overhead_bytes": 0}

"""Where llama.cpp puts each layer with its layer split (split_mode LAYER): the CPU, or which GPU.

As load_tensors in llama.cpp's src/llama-model.cpp does it: the output layer is offloaded first,
so `n_gpu_layers` = N (of n_layers + 1) puts the output layer and the last N - 1 repeating layers
on the GPUs and keeps the first ones on the CPU (the token embedding always stays there). The N
GPU slots are dealt out in order by the cumulative shares of `tensor_split`, normalised in float32
as llama.cpp computes them: slot k goes to the first GPU whose cumulative share exceeds k / N. So
the output layer lands on the last GPU with a share. A layer's KV cache lives on its device
(src/llama-kv-cache.cpp).
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_right
from collections.abc import Sequence

# GGML_SCHED_MAX_COPIES: with pipeline parallelism, ggml's scheduler keeps this many copies of
# every input of each device's part of the graph, so consecutive ubatches can overlap.
PIPELINE_COPIES = 4


def _f32(x: float) -> float:
    """`x` rounded to float32, the type llama.cpp computes the split in."""
    return struct.unpack("f", struct.pack("f", x))[0]


def split_points(tensor_split: Sequence[float]) -> tuple[float, ...]:
    """llama.cpp's cumulative, normalised shares of `tensor_split`; one GPU (1.0) when it is empty.

    Raises:
        ValueError: a share that is negative or not a number, or shares that are all zero (llama.cpp
            would then split by each GPU's free memory, which only it knows at load time).
    """
    if not tensor_split:
        return (1.0,)
    bad = [s for s in tensor_split if not math.isfinite(s) or s < 0]
    if bad:
        raise ValueError(f"tensor_split shares must be finite and not negative, not {bad[0]!r}")
    if not any(tensor_split):
        raise ValueError("tensor_split is all zero: give each GPU's share of the layers")
    total, points = 0.0, []
    for share in tensor_split:
        total = _f32(total + _f32(share))
        points.append(total)
    return tuple(_f32(p / total) for p in points)


def gpu_layer_count(n_layers: int, n_gpu_layers: int) -> int:
    """Layers llama.cpp offloads, the output layer counted: a negative `n_gpu_layers` means all."""
    return n_layers + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layers + 1)


def layer_devices(n_layers: int, n_gpu_layers: int, tensor_split: Sequence[float] = ()) -> tuple[int | None, ...]:
    """For each repeating layer, then the output layer: the index of its GPU in `tensor_split`, or None (CPU)."""
    offloaded = gpu_layer_count(n_layers, n_gpu_layers)
    first = n_layers + 1 - offloaded
    points = split_points(tensor_split)
    return tuple(
        None if layer < first else bisect_right(points, _f32((layer - first) / offloaded))
        for layer in range(n_layers + 1)
    )


def pipeline_parallel(n_layers: int, n_gpu_layers: int, tensor_split: Sequence[float]) -> bool:
    """Whether llama.cpp turns on pipeline parallelism: several GPUs and every layer on them.

    (src/llama-context.cpp also asks for the layer split, the KV cache offloaded and no tensor
    overrides, which is how the engine always loads; CUDA devices have the async copies it needs.)
    """
    return len(tensor_split) > 1 and gpu_layer_count(n_layers, n_gpu_layers) == n_layers + 1


def shares_of(free_bytes: Sequence[int]) -> tuple[float, ...]:
    """A tensor_split in proportion to each GPU's free memory (4 decimals); empty for one GPU or none free."""
    total = sum(max(0, f) for f in free_bytes)
    if len(free_bytes) < 2 or total <= 0:
        return ()
    return tuple(round(max(0, f) / total, 4) for f in free_bytes)


def layer_ranges(devices: Sequence[int | None], gpu: int) -> str:
    """The layers `devices` (layer_devices' answer) puts on GPU `gpu`, in words: "layers 0-40 and the output layer"."""
    n_layers = len(devices) - 1
    layers = [i for i in range(n_layers) if devices[i] == gpu]
    runs: list[str] = []
    for i in layers:
        if runs and int(runs[-1].rpartition("-")[2]) == i - 1:
            runs[-1] = f"{runs[-1].partition('-')[0]}-{i}"
        else:
            runs.append(str(i))
    words = f"layer{'s' if len(layers) != 1 else ''} {', '.join(runs)}" if layers else ""
    if devices[n_layers] == gpu:
        words = f"{words} and the output layer" if words else "the output layer"
    return words or "no layers"

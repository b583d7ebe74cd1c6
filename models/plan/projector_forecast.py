"""The memory a multimodal projector (`mmproj-*.gguf`) takes beside its model: weights and compute buffer.

The weights are exact: the bytes of its tensors, as llama.cpp's clip loader allocates them (it logs the same
figure as "model size").

The compute buffer is what ggml's graph allocator reserves for the encoder's graph, and libmtmd reserves it
once, at load ("warmup"), for one dummy image: a square of the encoder's own `image_size` for SigLIP-style
encoders (Gemma 3, SmolVLM's idefics3), and for the Qwen-VL mergers a square of 46 × 46 merged tokens
(46 · patch · merge pixels a side, 8464 patches, whatever `image_size` says), so the forecast does not
depend on the images a user sends later. Flash attention is on (libmtmd tries it first and keeps it where
the backend runs it; the CPU's does), so no [patches × patches] score matrix is made, but Qwen2.5-VL's window
attention still makes its [patches × patches] mask, and that mask is most of its buffer.

The figure is not a sum of sizes: the allocator reuses memory as tensors die, so the buffer is the highest
address reached while walking the graph in order. This replays that walk (models/plan/ggml_graph.py) on the
encoder's graph built from the file's own tensors (models/plan/clip_graphs.py): the image and its
f16 im2col patches, the patch embeddings, each layer's normed input, Q, K, V and their f16 casts, the
attention output, the feed-forward's up (and gate) activations, and the projector's tail (Gemma 3's pooled
tokens and the f16 copy of its transposed projection, idefics3's pixel shuffle, the Qwen mergers' MLP).
The peak comes in the second layer. For Gemma 3, idefics3 and Qwen2-VL it is the feed-forward's up
activation (n_ff × patches in f32, the graph's largest tensor): it fits in no free block below, so it goes
on top of the residual stream, the feed-forward's normed input (and Gemma 3's copy of its projection) and
the gaps freed between them (Gemma 3 at 896 px: 54 MiB below it, 16.7 of them free, then 67.25 MiB); for
Qwen3-VL the fused Q, K, V product (3 × n_embd × patches) and what follows it. From there on each layer
reuses the same blocks, so 2 layers or 27 of the same width reserve the same (one layer less).
Qwen2.5-VL peaks earlier, on its window mask: a graph input, so allocated before anything else in f32,
then cast to f16 at the first windowed layer while the f32 one is still alive.

Measured against llama.cpp's logged compute buffers on the CPU (tests/engine/gguf/test_projector_forecast.py
loads each shape with libmtmd and allows 5 %), the replay meets llama.cpp's figure to the log's two decimals;
forecast ÷ llama.cpp's: Gemma 3 at 224 px / 14, width 384 (3.80 MiB) 0.999, at 448 px / 14 (21.00 MiB)
1.000, at its real size, 896 px / 14, width 1152, ff 4304 (121.25 MiB, the same at 2 layers and 27) 1.000;
SmolVLM's 512 px / 16 (21.00 MiB) 1.000; idefics3 at 224 px / 14 (2.62 MiB) 1.002; Qwen2-VL width 640
(174.09 MiB), Qwen2.5-VL width 640 with windows (511.71 MiB) and Qwen3-VL width 512 with a deepstack
layer (107.58 MiB) 1.000; and at the Qwen encoders' real widths, 1280 / 1280 / 1024 (267.08, 594.37 and
223.30 MiB), 1.000 too. On a GPU the same graph is reserved with that backend's alignment (128 bytes on
CUDA, whose flash attention takes these head sizes) and the image input in a small CPU buffer beside it:
close, but not measured here.

Other vision types get the same replay of a generic ViT graph (build_vit over `image_size`, then one
projection): an estimate not checked against llama.cpp, as their warmup sizes and projector tails differ.
Audio encoders are not forecast here (0). The memory report after a load shows llama.cpp's own figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.formats.projector_header import ProjectorInfo
from models.plan.clip_graphs import Builder, EncoderShape, generic_vit, qwen2vl, qwen3vl, siglip
from models.plan.ggml_graph import reserved_bytes

# The encoder graph of each projector type (clip.cpp's clip_get_graph_builder) that has been checked
# against llama.cpp's own buffers.
_BUILDERS: dict[str, Builder] = {
    "gemma3": siglip,
    "idefics3": siglip,
    "qwen2vl_merger": qwen2vl,
    "qwen2.5vl_merger": qwen2vl,
    "qwen3vl_merger": qwen3vl,
}
# Types whose warmup image is a square of this many merged tokens (clip.cpp's set_warmup_n_tokens), not
# of image_size.
_WARMUP_TOKENS = {"qwen2vl_merger": 46 * 46, "qwen2.5vl_merger": 46 * 46, "qwen3vl_merger": 46 * 46}


@dataclass(slots=True, frozen=True)
class ProjectorForecast:
    weights_bytes: int
    compute_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.compute_bytes


def projector_forecast(info: ProjectorInfo) -> ProjectorForecast:
    """What `info`'s projector takes once loaded (no compute where no graph can be built from the file: an
    audio-only projector, an encoder without a ViT's tensors such as gemma3n's MobileNet)."""
    return ProjectorForecast(info.weights_bytes, vision_compute_bytes(info))


def warmup_image_size(info: ProjectorInfo) -> int | None:
    """The side of the dummy image libmtmd reserves the compute buffer for (hparams.warmup_image_size)."""
    if not info.image_size or not info.patch_size:
        return None
    tokens = _WARMUP_TOKENS.get(info.projector_type)
    if tokens is None:
        return info.image_size
    return int(tokens ** 0.5) * info.patch_size * info.merge


def vision_compute_bytes(info: ProjectorInfo) -> int:
    """The compute buffer llama.cpp reserves for the vision encoder, on the CPU (see the module docstring)."""
    size = warmup_image_size(info)
    if not info.has_vision or size is None or not info.n_embd or info.n_layers is None:
        return 0
    shape = EncoderShape(
        projector_type=info.projector_type,
        n_embd=info.n_embd,
        n_heads=info.n_heads or 1,
        n_layers=info.n_layers,
        patch_size=info.patch_size,
        merge=info.merge,
        tensors={t.name: t for t in info.tensors},
        window_pattern=info.window_pattern,
        projection_dim=info.n_embd_out,
    )
    try:
        graph = _BUILDERS.get(info.projector_type, generic_vit)(shape, size)
    except KeyError:  # a tensor the graph reads is not in the file: not an encoder these graphs describe
        return 0
    return reserved_bytes(graph)

"""The memory a multimodal projector (`mmproj-*.gguf`) takes beside its model: weights and compute buffer.

The weights are exact: the bytes of its tensors, as llama.cpp's clip loader allocates them (it logs the same
figure as "model size"). The compute buffer is estimated: libmtmd reserves it at load for one image of the
encoder's own size (`image_size`), and what the graph allocator keeps at its peak is, for the ViT encoders
projectors use, about 1.6 feed-forward activations of every patch in f32 (the allocator reuses the buffers
from layer to layer: 2 layers or 12 of the same width reserve the same) plus the input image in f32. Measured against llama.cpp's
logged compute buffers on the CPU: Gemma 3 shapes at 224 px / 14 (3.8 MiB) -21 %, at 448 px / 14 +2 %,
at 896 px / 14 (its real size, 104.5 MiB) +12 %; SmolVLM's 512 px / 16 (21.0 MiB) +6 %
(tests/engine/gguf/test_projector_forecast.py checks three of them). The memory report after a load shows
llama.cpp's own figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.formats.projector_header import ProjectorInfo

# Peak live f32 activations of a ViT layer, in feed-forward rows per patch (fitted; see the docstring).
_FFN_ROWS_AT_PEAK = 1.6
_F32 = 4


@dataclass(slots=True, frozen=True)
class ProjectorForecast:
    weights_bytes: int
    compute_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.compute_bytes


def projector_forecast(info: ProjectorInfo) -> ProjectorForecast:
    """What `info`'s projector takes once loaded (the compute left out where the header gives no feed-forward
    width: an audio-only projector, or a file without the key)."""
    compute, n_ff = 0, info.n_ff
    if info.image_size and info.patch_size and n_ff:
        patches = (info.image_size // info.patch_size) ** 2
        image = info.image_size * info.image_size * 3 * _F32
        compute = int(_FFN_ROWS_AT_PEAK * patches * n_ff * _F32) + image
    return ProjectorForecast(info.weights_bytes, compute)

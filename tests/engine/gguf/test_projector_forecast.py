"""The projector's forecast against llama.cpp's own buffers (the "model size" and "compute buffer size" libmtmd
logs at load), on projectors of several SigLIP shapes that libmtmd really loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.gguf import llama_mtmd
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from models.formats.projector_header import read_projector_info
from models.plan.projector_forecast import projector_forecast
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

MIB = 1024 * 1024
# (type, image size, patch size, width, feed-forward width, heads, merge): SmolVLM's and Gemma 3's encoders at
# 2 layers (the compute buffer does not grow with layers of the same width: the allocator reuses them).
SHAPES = [
    ("gemma3", 224, 14, 384, 1536, 6, 4),
    ("idefics3", 512, 16, 768, 3072, 12, 4),
    ("gemma3", 448, 14, 768, 3072, 12, 4),
]


@pytest.fixture(scope="module")
def llama(starter_model: Path):
    handle = LlamaHandle(starter_model, LlamaSettings(n_ctx=256, n_threads=2, n_seq=1), lambda: None)
    yield handle
    handle.close()


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[0]}-{s[1]}px-{s[3]}" for s in SHAPES])
def test_the_forecast_meets_llama_cpp_s_own_buffers(shape, llama: LlamaHandle, tmp_path: Path):
    kind, image_size, patch, width, ff, heads, merge = shape
    path = write_tiny_projector(tmp_path / "mmproj.gguf", TinyProjectorSpec(
        projector_type=kind, image_size=image_size, patch_size=patch, n_embd=width, n_ff=ff, n_heads=heads,
        n_layers=2, merge=merge, longest_edge=image_size if kind == "idefics3" else None))
    lines: list[str] = []
    callback = llama_mtmd.install_log_callback(lambda _level, text, _data: lines.append(text.decode()))
    try:
        llama_mtmd.Projector(path, llama, use_gpu=False, n_threads=2).close()
    finally:
        llama_mtmd.reset_log_callback()
    del callback
    logged = "".join(lines)
    weights = float(re.search(r"model size:\s+([\d.]+) MiB", logged).group(1)) * MIB
    compute = sum(float(m) for m in re.findall(r"compute buffer size =\s+([\d.]+) MiB", logged)) * MIB
    forecast = projector_forecast(read_projector_info(path))
    assert abs(forecast.weights_bytes - weights) <= 0.01 * MIB  # exact, to the log's two decimals
    assert 0.75 <= forecast.compute_bytes / compute <= 1.15, (forecast.compute_bytes / MIB, compute / MIB)

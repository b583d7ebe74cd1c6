"""The projector's forecast against llama.cpp's own buffers (the "model size" and "compute buffer size" libmtmd
logs at load), on projectors of the encoder families the forecast builds graphs of, which libmtmd really
loads: SigLIP (Gemma 3, SmolVLM's idefics3) and the Qwen2-VL, Qwen2.5-VL and Qwen3-VL mergers."""

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


def _spec(kind: str, image_size: int, patch: int, width: int, ff: int, heads: int, merge: int,
          **more) -> TinyProjectorSpec:
    return TinyProjectorSpec(projector_type=kind, image_size=image_size, patch_size=patch, n_embd=width, n_ff=ff,
                             n_heads=heads, n_layers=2, merge=merge,
                             longest_edge=image_size if kind == "idefics3" else None, **more)


# The encoders at 2 layers: from the second layer on, each reuses the blocks the one before it freed, so 2
# layers reserve what 27 of the same width do (checked on Gemma 3's real shape; 1 layer reserves less).
SHAPES = {
    "gemma3-224px": _spec("gemma3", 224, 14, 384, 1536, 6, 4),  # a small SigLIP
    "gemma3-448px": _spec("gemma3", 448, 14, 768, 3072, 12, 4),
    "gemma3-896px-real": _spec("gemma3", 896, 14, 1152, 4304, 16, 4),  # Gemma 3's own encoder
    "idefics3-512px-smolvlm": _spec("idefics3", 512, 16, 768, 3072, 12, 4),  # SmolVLM-256M/500M's
    "idefics3-224px": _spec("idefics3", 224, 14, 384, 1536, 6, 2),
    # The Qwen mergers reserve for 46 × 46 merged tokens whatever image_size says (8464 patches).
    "qwen2vl": _spec("qwen2vl_merger", 560, 14, 640, 2560, 10, 2),
    "qwen2.5vl-windows": _spec("qwen2.5vl_merger", 560, 14, 640, 1710, 10, 2, window_pattern=2),
    "qwen3vl-deepstack": _spec("qwen3vl_merger", 768, 16, 512, 2048, 8, 2, deepstack_layers=(1,)),
}


@pytest.fixture(scope="module")
def llama(starter_model: Path):
    handle = LlamaHandle(starter_model, LlamaSettings(n_ctx=256, n_threads=2, n_seq=1), lambda: None)
    yield handle
    handle.close()


@pytest.mark.parametrize("spec", SHAPES.values(), ids=SHAPES.keys())
def test_the_forecast_meets_llama_cpp_s_own_buffers(spec: TinyProjectorSpec, llama: LlamaHandle, tmp_path: Path):
    path = write_tiny_projector(tmp_path / "mmproj.gguf", spec)
    lines: list[str] = []
    callback = llama_mtmd.install_log_callback(lambda _level, text, _data: lines.append(text.decode()))
    try:
        llama_mtmd.Projector(path, llama, use_gpu=False, n_threads=2).close()
    finally:
        llama_mtmd.reset_log_callback()
    del callback
    logged = "".join(lines)
    assert "flash attention is enabled" in logged  # the graph the forecast builds
    weights = float(re.search(r"model size:\s+([\d.]+) MiB", logged).group(1)) * MIB
    compute = sum(float(m) for m in re.findall(r"compute buffer size =\s+([\d.]+) MiB", logged)) * MIB
    forecast = projector_forecast(read_projector_info(path))
    assert abs(forecast.weights_bytes - weights) <= 0.01 * MIB  # exact, to the log's two decimals
    assert 0.95 <= forecast.compute_bytes / compute <= 1.05, (forecast.compute_bytes / MIB, compute / MIB)

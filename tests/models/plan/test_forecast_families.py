"""The forecast of every architecture family against llama.cpp's own buffer log, on the CPU.

A cut of `make bench`'s forecast_accuracy (which runs every family x quant x context x KV case):
each family at Q4_K_M (whose Q4_K matrices the CPU repacks) and IQ4_XS (which it does not), and
gemma3's sliding-window cache full-size and windowed, at 32k without flash attention (the
largest attention buffers). Weights, KV cache and compute must each be within 5%.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.gguf.devices import read_devices
from models.plan.cpu_repack import cpu_repack_of
from models.plan.forecast import ForecastSettings
from tests.bench.forecast_accuracy import measure, relative_error
from tests.fixtures.llama_buffers import LlamaBufferProbe
from tests.fixtures.tiny_families import FAMILIES

CASES = [(f"{family}-{quant}", 8192, True, True) for family in FAMILIES for quant in ("q4_k_m", "iq4_xs")] + [
    ("gemma3-q6_k", 32768, False, True),
    ("gemma3-q6_k", 32768, False, False),
    ("gemma3-q4_k_m", 2048, True, False),
    ("qwen3moe-q8_0", 32768, False, True),
]


@pytest.fixture(scope="module")
def probe() -> LlamaBufferProbe:
    return LlamaBufferProbe()


@pytest.mark.parametrize(("model", "n_ctx", "flash_attn", "swa_full"), CASES)
def test_forecast_matches_llama_cpp(family_corpus: dict[str, Path], probe, model, n_ctx, flash_attn, swa_full):
    settings = ForecastSettings(n_ctx=n_ctx, flash_attn=flash_attn, swa_full=swa_full,
                                repack_types=cpu_repack_of(read_devices()))
    parts = measure(family_corpus[model], settings, probe)
    errors = {part: relative_error(*pair) for part, pair in parts.items()}
    assert max(errors.values()) <= 0.05, (parts, errors)


def test_the_repacked_copy_is_really_there(family_corpus: dict[str, Path], probe):
    """On this CPU llama.cpp repacks Q4_K (AVX2 or ARM dot-product): the forecast counts it, and must."""
    repack = cpu_repack_of(read_devices())
    assert 12 in repack  # Q4_K
    with_copy = measure(family_corpus["llama-q4_k_m"], ForecastSettings(n_ctx=2048, repack_types=repack), probe)
    without = measure(family_corpus["llama-q4_k_m"], ForecastSettings(n_ctx=2048), probe)
    forecast_with, real = with_copy["weights"]
    assert relative_error(forecast_with, real) <= 0.02
    assert relative_error(without["weights"][0], real) > 0.05  # leaving it out misses the target


def test_the_full_size_window_cache_is_what_llama_cpp_allocates_by_default(family_corpus: dict[str, Path], probe):
    full = measure(family_corpus["gemma3-q4_k_m"], ForecastSettings(n_ctx=8192), probe)
    windowed = measure(family_corpus["gemma3-q4_k_m"], ForecastSettings(n_ctx=8192, swa_full=False), probe)
    assert full["kv"][0] == full["kv"][1]
    assert windowed["kv"][0] == windowed["kv"][1]
    assert windowed["kv"][1] < full["kv"][1] / 3  # 5 of 6 layers keep 512 + 512 of 8,192 cells

"""Plans on the CPU of a 16 GB machine, with what llama.cpp really allocates there.

Two things the forecast used to leave out decide these verdicts: on an x86 CPU with AVX2,
llama.cpp keeps a second, repacked copy of every Q4_K matrix of the layers (not of Q6_K or
Q8_0 ones), and a sliding-window model (Gemma 3) gets a full-size cache for its window layers
unless the plan asks for the windowed one. The expected figures are worked out here from the
tensor sizes, independently of the forecast's code.
"""

from __future__ import annotations

from models.plan.candidates import Candidate, gguf_candidates
from models.plan.cpu_repack import parse_system_info, repack_types
from models.plan.decision_tree import make_plan
from models.plan.forecast import ForecastSettings, forecast, shape_from_gguf
from models.plan.machine import Machine
from models.units import GIB
from tests.fixtures.real_shapes import GEMMA_3_27B, LLAMA_3_1_8B, q4_k_m_header

GB = 10**9
X86_AVX2 = repack_types(parse_system_info("CPU : SSE3 = 1 | AVX2 = 1 | FMA = 1 | REPACK = 1 |"))
# 16 GB of RAM, 14 GiB of it available; the plan keeps 2 GiB free and a 5% margin: 11.4 GiB.
SIXTEEN_GB = Machine(None, 0, 0, None, 14 * GIB, cpu_repack=X86_AVX2)
Q4_K = 12


def repo(header, sizes_gb: dict[str, float], prefix: str) -> list[Candidate]:
    files = [(f"{prefix}-{q}.gguf", int(s * GB)) for q, s in sizes_gb.items()]
    files.append((f"{prefix}-Q4_K_M.gguf", header.file_size))
    return gguf_candidates(files, shape_from_gguf(header))


LLAMA = q4_k_m_header(LLAMA_3_1_8B)
REPO_8B = repo(LLAMA, {"Q2_K": 3.18, "Q5_K_M": 5.73, "Q6_K": 6.6, "Q8_0": 8.54, "F16": 16.07}, "Llama-3.1-8B")
GEMMA = q4_k_m_header(GEMMA_3_27B)
REPO_27B = repo(GEMMA, {"Q2_K": 10.5, "Q3_K_M": 13.4, "Q6_K": 22.2, "Q8_0": 28.7}, "gemma-3-27b-it")


def q4_k_layer_bytes(header) -> int:
    return sum(t.nbytes for t in header.tensors if t.name.startswith("blk.") and t.ggml_type == Q4_K)


def test_the_repacked_copy_is_counted_as_llama_cpp_allocates_it():
    plan = make_plan(SIXTEEN_GB, REPO_8B, context=8192)
    assert plan.quant == "Q4_K_M" and plan.fits, plan.reasons
    repacked = q4_k_layer_bytes(LLAMA)
    assert 3.0 * GIB < repacked < 3.3 * GIB  # most of the 4.6 GiB file is Q4_K
    assert plan.forecast.devices["cpu"].weights_bytes == LLAMA.file_size + repacked


def test_at_32k_q4_k_m_no_longer_fits_a_16_gb_machine_but_q6_k_does():
    # Q4_K_M: 4.6 GiB file + 3.1 GiB repacked + 4 GiB of f16 KV cache (32 layers x 32,768 cells x
    # 2 x 8 heads x 128 x 2 bytes) = 11.7 GiB before compute, over the 11.4 GiB to plan with.
    # Q6_K is not repacked on x86: 6.1 GiB + 4 GiB fits (Q8_0's 8.0 GiB + 4 GiB does not).
    plan = make_plan(SIXTEEN_GB, REPO_8B, context=32768)
    kv = 32 * 32768 * 2 * 8 * 128 * 2
    assert plan.forecast.devices["cpu"].kv_cache_bytes == kv
    assert plan.quant == "Q6_K" and plan.fits, plan.reasons
    assert any("Q4_K_M" in r and "does not fit in RAM" in r for r in plan.reasons)
    q4 = next(c for c in REPO_8B if c.quant == "Q4_K_M")
    total = forecast(q4.shape, ForecastSettings(n_ctx=32768, repack_types=X86_AVX2)).total("total_bytes")
    assert total > 11.4 * GIB
    # Without the repacked copy (a CPU that repacks nothing) the same file fits: the old verdict.
    no_repack = Machine(None, 0, 0, None, 14 * GIB)
    assert make_plan(no_repack, REPO_8B, context=32768).quant == "Q4_K_M"


def test_gemma_3_27b_needs_its_windowed_cache_and_still_does_not_fit_16_gb():
    shape = shape_from_gguf(GEMMA)
    assert sum(shape.swa_layers) == 52 and shape.sliding_window == 1024  # 5 of every 6 layers
    full = forecast(shape, ForecastSettings(n_ctx=8192, repack_types=X86_AVX2))
    windowed = forecast(shape, ForecastSettings(n_ctx=8192, repack_types=X86_AVX2, swa_full=False))
    per_cell = 2 * 16 * 128 * 2
    assert full.total("kv_cache_bytes") == 62 * 8192 * per_cell
    # Windowed: 52 layers keep 1,024 + one 512-token ubatch cells (padded to 256), 10 keep all.
    assert windowed.total("kv_cache_bytes") == (52 * 1536 + 10 * 8192) * per_cell
    plan = make_plan(SIXTEEN_GB, REPO_27B, context=8192)
    assert not plan.fits, plan.reasons
    assert plan.quant == "Q2_K"  # the smallest file, offered with what would make it fit
    assert any("Nothing fits" in r for r in plan.reasons)


def test_gemma_3_27b_on_a_32_gb_machine_loads_with_the_windowed_cache():
    machine = Machine(None, 0, 0, None, 30 * GIB, cpu_repack=X86_AVX2)
    plan = make_plan(machine, REPO_27B, context=32768)
    assert plan.fits, plan.reasons
    assert not plan.swa_full and plan.to_dict()["swa_full"] is False
    assert any("sliding-window layers keep only their 1,024-token window" in r for r in plan.reasons)
    chosen = next(c for c in REPO_27B if c.quant == plan.quant)
    full = forecast(chosen.shape, ForecastSettings(n_ctx=32768, repack_types=X86_AVX2))
    assert full.total("total_bytes") > int((30 - 2) * GIB * 0.95)  # the full-size cache would not fit

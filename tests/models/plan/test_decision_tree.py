"""The decision tree, table-driven over machines and repos (sizes from the issue's reference points)."""

from __future__ import annotations

import pytest

from models.plan.candidates import Candidate, gguf_candidates
from models.plan.decision_tree import make_plan
from models.plan.forecast import ModelShape, scaled_to
from models.plan.machine import Machine
from models.units import GIB

GB = 10**9


def llama_shape(n_layers: int, n_embd: int, n_ff: int, n_heads: int, n_kv: int, total: float) -> ModelShape:
    vocab = 128256
    embd = int(total * GB * 0.07)
    per_layer = int((total * GB - 2 * embd) / n_layers)
    return ModelShape(
        n_layers=n_layers, n_embd=n_embd, n_heads=n_heads, n_kv_heads=(n_kv,) * n_layers, head_dim_k=128,
        head_dim_v=128, n_vocab=vocab, n_ctx_train=131072, swa_layers=(False,) * n_layers, sliding_window=None,
        layer_weight_bytes=(per_layer,) * n_layers, input_weight_bytes=embd, output_weight_bytes=embd,
    )


LLAMA_8B = llama_shape(32, 4096, 14336, 32, 8, 14.0)
LLAMA_70B = llama_shape(80, 8192, 28672, 64, 8, 122.5)
SIZES_8B = {"Q2_K": 2.7, "Q4_K_M": 4.1, "Q5_K_M": 4.8, "Q6_K": 5.5, "Q8_0": 7.2, "F16": 14.0}


def repo(shape: ModelShape, scale: float, prefix: str) -> list[Candidate]:
    files = [(f"{prefix}-{q}.gguf", int(s * scale * GB)) for q, s in SIZES_8B.items()]
    return gguf_candidates(files, shape)


REPO_8B = repo(LLAMA_8B, 1.0, "Llama-3.1-8B-Instruct")
REPO_70B = repo(LLAMA_70B, 8.75, "Llama-3.1-70B-Instruct")
AWQ_8B = Candidate("awq", ("model.safetensors",), "AWQ-4bit", int(5.7 * GB), scaled_to(LLAMA_8B, int(5.7 * GB)))
FP8_70B = Candidate(
    "fp8", ("model-00001-of-00015.safetensors",), "FP8", int(70.6 * GB), scaled_to(LLAMA_70B, int(70.6 * GB))
)


def machine(name: str | None, vram_gib: float = 0, free_gib: float | None = None, cc=None, ram_gib=32) -> Machine:
    if name is None:
        return Machine(None, 0, 0, None, int(ram_gib * GIB))
    free = vram_gib - 0.4 if free_gib is None else free_gib
    return Machine(name, int(free * GIB), int(vram_gib * GIB), cc, int(ram_gib * GIB))


CPU = machine(None, ram_gib=32)
RTX_3060 = machine("NVIDIA GeForce RTX 3060", 12, cc=(8, 6))
RTX_4070 = machine("NVIDIA GeForce RTX 4070", 12, cc=(8, 9))
RTX_4090 = machine("NVIDIA GeForce RTX 4090", 24, cc=(8, 9), ram_gib=64)
A10 = machine("NVIDIA A10", 24, cc=(8, 6), ram_gib=64)
A100 = machine("NVIDIA A100-SXM4-80GB", 80, cc=(8, 0), ram_gib=256)
H100 = machine("NVIDIA H100 80GB HBM3", 80, cc=(9, 0), ram_gib=256)
FULL_4090 = machine("NVIDIA GeForce RTX 4090", 24, free_gib=3.0, cc=(8, 9), ram_gib=64)


@pytest.mark.parametrize(
    ("name", "m", "candidates", "torch_ok", "format", "quant", "offload"),
    [
        ("cpu 8B", CPU, REPO_8B, False, "gguf", "Q4_K_M", "none"),
        ("cpu 70B: only Q2_K fits 32 GB", CPU, REPO_70B, False, "gguf", "Q2_K", "none"),
        ("3060 8B", RTX_3060, REPO_8B, False, "gguf", "Q8_0", "full"),
        ("4070 8B", RTX_4070, REPO_8B, False, "gguf", "Q8_0", "full"),
        ("4090 8B", RTX_4090, REPO_8B, False, "gguf", "F16", "full"),
        ("A10 8B with AWQ and torch", A10, [*REPO_8B, AWQ_8B], True, "awq", "AWQ-4bit", "full"),
        ("A10 8B with AWQ, no torch", A10, [*REPO_8B, AWQ_8B], False, "gguf", "F16", "full"),
        ("A100 70B", A100, REPO_70B, False, "gguf", "Q8_0", "full"),
        ("H100 70B with FP8 and torch", H100, [*REPO_70B, FP8_70B], True, "fp8", "FP8", "full"),
        ("A100 70B with FP8: cc 8.0 cannot run FP8", A100, [*REPO_70B, FP8_70B], True, "gguf", "Q8_0", "full"),
        ("4090 70B: partial offload", RTX_4090, REPO_70B, False, "gguf", None, "partial"),
        ("almost-full 4090 8B", FULL_4090, REPO_8B, False, "gguf", None, "partial"),
    ],
)
def test_tree(name, m, candidates, torch_ok, format, quant, offload):
    plan = make_plan(m, candidates, context=4096, kv_type="f16", torch_ok=torch_ok)
    assert plan.fits, plan.reasons
    assert plan.format == format, plan.reasons
    if quant:
        assert plan.quant == quant, plan.reasons
    expected_layers = {"none": 0, "full": plan.n_layers + 1}.get(offload)
    if expected_layers is not None:
        assert plan.n_gpu_layers == expected_layers
    else:
        assert 0 < plan.n_gpu_layers <= plan.n_layers
        assert 2 * plan.n_gpu_layers >= plan.n_layers, "partial offload keeps at least half the layers on the GPU"
    assert plan.reasons and all(isinstance(r, str) and r for r in plan.reasons)
    gpu = sum(d.total_bytes for n, d in plan.forecast.devices.items() if n != "cpu")
    assert gpu <= m.gpu_free_bytes


def test_partial_offload_picks_the_best_level_with_half_its_layers_on_the_gpu():
    plan = make_plan(RTX_4090, REPO_70B, context=4096)
    # llama.cpp offloads the output layer first, so 40 GPU layers are the output and 39 repeating
    # layers: 22.8 GiB of Q6_K (48 GB) with their KV cache, over the 21.8 GiB budget; Q5_K_M fits 44.
    assert plan.quant == "Q5_K_M"
    assert 40 <= plan.n_gpu_layers < 80
    assert "layers on the GPU" in plan.reasons[-1]
    assert any("Q8_0" in r and "does not fit entirely" in r for r in plan.reasons)


def test_kv_cache_of_llama_8b_at_4096_is_half_a_gib_with_gqa_and_2_gib_without():
    plan = make_plan(CPU, REPO_8B, context=4096)
    assert plan.forecast.total("kv_cache_bytes") == 512 * 1024**2
    no_gqa = llama_shape(32, 4096, 14336, 32, 32, 14.0)
    plan = make_plan(CPU, gguf_candidates([("x-Q4_K_M.gguf", int(4.1 * GB))], no_gqa), context=4096)
    assert plan.forecast.total("kv_cache_bytes") == 2 * 1024**3


def test_nothing_fits_says_so_and_what_would():
    tiny = machine("NVIDIA GeForce RTX 3060", 12, cc=(8, 6), ram_gib=8)
    plan = make_plan(tiny, REPO_70B, context=32768)
    assert not plan.fits
    assert plan.quant == "Q2_K"
    assert any("Nothing fits" in r for r in plan.reasons)
    assert "smaller model" in plan.reasons[-1] or "would fit" in plan.reasons[-1]


def test_split_files_form_one_candidate_and_projectors_are_left_out():
    files = [
        ("Q8_0/m-Q8_0-00001-of-00002.gguf", 40 * GB),
        ("Q8_0/m-Q8_0-00002-of-00002.gguf", 35 * GB),
        ("m-Q4_K_M.gguf", 42 * GB),
        ("mmproj-m-f16.gguf", 1 * GB),
    ]
    cands = {c.quant: c for c in gguf_candidates(files, LLAMA_70B)}
    assert set(cands) == {"Q8_0", "Q4_K_M"}
    assert cands["Q8_0"].files == ("Q8_0/m-Q8_0-00001-of-00002.gguf", "Q8_0/m-Q8_0-00002-of-00002.gguf")
    assert cands["Q8_0"].size_bytes == 75 * GB
    plan = make_plan(A100, list(cands.values()), context=4096)
    assert plan.quant == "Q8_0" and len(plan.to_dict()["files"]) == 2


def test_plan_json_has_the_documented_fields():
    d = make_plan(RTX_4090, REPO_8B).to_dict()
    for key in ("format", "file", "quant", "n_layers", "n_gpu_layers", "context", "kv_type", "flash_attn",
                "n_batch", "n_ubatch", "fits", "reasons", "forecast"):
        assert key in d
    f = d["forecast"]
    assert set(f) >= {"weights_bytes", "kv_cache_bytes", "compute_bytes", "overhead_bytes", "total_bytes", "devices"}
    assert set(f["devices"]) == {"cpu", "cuda:0"}


def test_no_candidates_is_an_error():
    with pytest.raises(ValueError, match="no GGUF"):
        make_plan(CPU, [])

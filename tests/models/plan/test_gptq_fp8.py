"""GPTQ and FP8 checkpoints in the plan: the decision tree's order, the folder plan's bytes and reasons.

Sizes are those of real repos (Llama-3.1-8B: GPTQ 4-bit 5.7 GB, FP8 9.1 GB; 70B: FP8 70.6 GB).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from models.formats.hf_config import hf_config_from_dict
from models.hub.repo_files import group_files
from models.plan.candidates import Candidate
from models.plan.decision_tree import make_plan
from models.plan.folder_plan import embedding_parameters, folder_candidate, parameter_count, plan_folder
from models.plan.forecast import scaled_to
from tests.fixtures.tiny_hf import big_folder
from tests.models.plan.test_decision_tree import (
    A10,
    A100,
    AWQ_8B,
    FP8_70B,
    GB,
    H100,
    LLAMA_8B,
    REPO_8B,
    RTX_3060,
    RTX_4090,
    machine,
)

GPTQ_8B = Candidate("gptq", ("gptq/model.safetensors",), "GPTQ 4-bit", int(5.7 * GB), scaled_to(LLAMA_8B, int(5.7 * GB)))
FP8_8B = Candidate("fp8", ("fp8/model.safetensors",), "FP8 8-bit", int(9.1 * GB), scaled_to(LLAMA_8B, int(9.1 * GB)))


@pytest.mark.parametrize(("name", "m", "candidates", "chosen"), [
    ("4090: GPTQ when the repo has no AWQ", RTX_4090, [*REPO_8B, GPTQ_8B], "gptq"),
    ("4090: AWQ first when both", RTX_4090, [*REPO_8B, GPTQ_8B, AWQ_8B], "awq"),
    ("4090 (cc 8.9): FP8 before 4-bit", RTX_4090, [*REPO_8B, GPTQ_8B, FP8_8B], "fp8"),
    ("A10 (cc 8.6): GPTQ, not FP8", A10, [*REPO_8B, GPTQ_8B, FP8_8B], "gptq"),
    ("H100: FP8", H100, [GPTQ_8B, FP8_8B], "fp8"),
])
def test_the_tree_orders_fp8_awq_gptq_as_the_guide_does(name: str, m, candidates, chosen: str) -> None:
    plan = make_plan(m, candidates, context=4096, torch_ok=True)
    assert plan.format == chosen and plan.fits and plan.n_gpu_layers == plan.n_layers + 1, name
    assert any(f"The whole {chosen.upper()} model fits in VRAM" in r for r in plan.reasons)


def test_an_fp8_only_repo_below_cc_8_9_is_upcast_when_it_fits_and_said_when_not() -> None:
    plan = make_plan(A10, [FP8_8B], context=4096, torch_ok=True)
    assert plan.format == "fp8" and plan.fits
    assert any("Compute capability 8.6 has no FP8 matmul" in r for r in plan.reasons)
    assert any("FP8 upcast to bf16 at load" in r for r in plan.reasons)
    # Upcast, the layers take twice their bytes in the forecast.
    assert plan.forecast.total("weights_bytes") > 1.8 * sum(FP8_8B.shape.layer_weight_bytes)
    too_big = make_plan(A100, [FP8_70B], context=4096, torch_ok=True)
    assert not too_big.fits
    assert any("The FP8 checkpoint upcast to bf16" in r and "does not fit" in r for r in too_big.reasons)


def test_the_tree_skips_fp8_below_cc_8_9_when_the_repo_has_gguf() -> None:
    plan = make_plan(RTX_3060, [*REPO_8B, FP8_8B], context=4096, torch_ok=True)
    assert plan.format == "gguf"
    assert any("Compute capability 8.6 has no FP8 matmul" in r for r in plan.reasons)


def test_gptq_that_is_not_4_bit_is_not_chosen_by_the_tree() -> None:
    gptq8 = replace(GPTQ_8B, quant="GPTQ 8-bit", files=("gptq8/model.safetensors",))
    plan = make_plan(RTX_4090, [*REPO_8B, gptq8], context=4096, torch_ok=True)
    assert plan.format == "gguf" and any("other than 4-bit are not chosen" in r for r in plan.reasons)


def test_compressed_tensors_fp8_is_grouped_as_fp8() -> None:
    quant = {"quant_method": "compressed-tensors", "format": "float-quantized",
             "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}
    config = hf_config_from_dict("config.json", {"quantization_config": quant})
    from models.hub.client import RepoFile

    (group,) = group_files([RepoFile("model.safetensors", 100, None, "")], config)
    assert (group.format, group.quant) == ("fp8", "FP8 8-bit")


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True}
FP8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
RTX_3090 = machine("NVIDIA GeForce RTX 3090", 24, cc=(8, 6), ram_gib=64)
CPU_64 = machine(None, ram_gib=64)


def _folder(tmp_path: Path, name: str, quant: dict, size: int) -> Candidate:
    return replace(folder_candidate(big_folder(tmp_path / name, quant)), size_bytes=size)


def test_a_gptq_70b_folder_keeps_4_bit_weights_on_a_64_gb_cpu(tmp_path: Path) -> None:
    candidate = _folder(tmp_path, "gptq", GPTQ, int(39.8 * GB))
    assert (candidate.format, candidate.quant) == ("gptq", "GPTQ 4-bit")
    plan = plan_folder(CPU_64, candidate, context=4096)
    assert plan.forecast.devices["cpu"].weights_bytes == candidate.size_bytes + 2 * embedding_parameters(candidate.shape)
    assert any("GPTQ weights kept 4-bit in PyTorch's int4 CPU kernel" in r for r in plan.reasons)


def test_an_fp8_folder_stays_8_bit_on_cc_8_9_and_is_upcast_below(tmp_path: Path) -> None:
    candidate = _folder(tmp_path, "fp8", FP8, int(70.6 * GB))
    on_h100 = plan_folder(H100, candidate, context=4096)
    assert on_h100.fits and on_h100.forecast.devices["cuda:0"].weights_bytes == candidate.size_bytes
    assert any("FP8 weights stay 8-bit" in r for r in on_h100.reasons)
    on_a100 = plan_folder(A100, candidate, context=4096)
    assert not on_a100.fits
    assert on_a100.forecast.devices["cuda:0"].weights_bytes == 2 * parameter_count(candidate.shape)
    assert any("Compute capability 8.0 has no FP8 matmul" in r and "upcast to bf16" in r for r in on_a100.reasons)
    (line,) = [r for r in on_a100.reasons if r.startswith("Does not fit")]
    assert "the FP8 weights are upcast to bf16 on this card" in line
    on_cpu = plan_folder(machine(None, ram_gib=512), candidate, context=4096)
    assert any("upcast from" in r and "no FP8 matmul on a CPU" in r for r in on_cpu.reasons)


@pytest.mark.parametrize("bits", [3, 2])
def test_3_and_2_bit_gptq_folders_are_refused_in_one_line(tmp_path: Path, bits: int) -> None:
    candidate = _folder(tmp_path, f"gptq{bits}", {**GPTQ, "bits": bits}, int(30 * GB))
    plan = plan_folder(RTX_3090, candidate, context=4096)
    assert not plan.fits
    assert [r for r in plan.reasons if "GPTQ is not supported" in r] == [
        f"{bits}-bit GPTQ is not supported by the PyTorch engine (only 4-bit and 8-bit): use a GGUF file of this model."]


def test_8_bit_gptq_on_a_gpu_is_planned_dequantized_to_bf16(tmp_path: Path) -> None:
    candidate = _folder(tmp_path, "gptq8", {**GPTQ, "bits": 8}, int(75 * GB))
    plan = plan_folder(H100, candidate, context=4096)
    assert plan.forecast.devices["cuda:0"].weights_bytes == 2 * parameter_count(candidate.shape)
    assert any("8-bit GPTQ has no int8 kernel here" in r for r in plan.reasons)

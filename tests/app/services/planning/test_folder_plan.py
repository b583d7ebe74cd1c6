"""The plan for a Hugging Face model folder: the PyTorch engine, where it runs, whether it fits, why.

Through the load planner (the window's plan, Ctrl+I) and `tailor plan --file DIR`, on a tiny AWQ
folder written by tests/fixtures/tiny_hf.py; big shapes are a config.json beside a stub file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.plan.folder_plan import (
    cpu_weights,
    embedding_parameters,
    folder_candidate,
    parameter_count,
    plan_folder,
)
from models.plan.load_options import TorchOptions
from models.plan.machine import Machine
from tests.fixtures.tiny_hf import big_folder, write_awq_copy, write_tiny_model

TAILOR = str(Path(sys.executable).with_name("tailor"))
CPU = Machine.from_profile(profile_for(ram_gib=64))
RTX_4090 = Machine.from_profile(profile_for("RTX 4090", ram_gib=64))


@pytest.fixture(scope="module")
def awq_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dense = tmp_path_factory.mktemp("dense")
    write_tiny_model(dense, "llama")
    awq = tmp_path_factory.mktemp("tiny-awq")
    write_awq_copy(dense, awq, 32)
    return awq


def test_awq_folder_on_the_cpu_runs_dequantized_in_fp32(awq_dir: Path) -> None:
    candidate = folder_candidate(awq_dir)
    assert candidate.format == "awq" and candidate.quant == "AWQ 4-bit" and candidate.files == (str(awq_dir),)
    plan = plan_folder(CPU, candidate, context=512)
    assert plan.fits and plan.n_gpu_layers == 0 and set(plan.forecast.devices) == {"cpu"}
    assert plan.forecast.total("weights_bytes") == 4 * parameter_count(candidate.shape)
    assert "PyTorch engine" in plan.reasons[0] and "dequantized" in plan.reasons[1]
    assert any("KV block pool" in r for r in plan.reasons)


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}


def test_cpu_weights_are_fp32_when_they_fit_else_awq_stays_4_bit_else_none(tmp_path: Path) -> None:
    shape = folder_candidate(big_folder(tmp_path / "big")).shape
    fp32 = 4 * parameter_count(shape)  # about 280 GB for a 70B model
    gib = 1 << 30
    pool = gib
    enough = int((fp32 + pool) / 0.94) + 2 * gib  # beyond the 2 GiB reserve and the 5% margin
    assert (cpu_weights(shape, None, pool, enough).kind, cpu_weights(shape, None, pool, enough).bytes) == ("fp32", fp32)
    assert cpu_weights(shape, None, pool, enough - 4 * gib).kind == "none"
    assert cpu_weights(shape, None, pool, 64 * gib).kind == "none"
    awq_file = 40 * 10**9
    kept = cpu_weights(shape, awq_file, pool, 64 * gib)
    assert kept.kind == "int4" and kept.bytes == awq_file + 2 * embedding_parameters(shape) and kept.fp32_bytes == fp32
    assert cpu_weights(shape, awq_file, pool, 32 * gib).kind == "none"


def test_a_70b_awq_folder_on_a_64_gb_cpu_keeps_its_weights_4_bit(tmp_path: Path) -> None:
    candidate = folder_candidate(big_folder(tmp_path / "awq70", AWQ))
    assert candidate.format == "awq"
    plan = plan_folder(CPU, candidate, context=4096)
    weights = plan.forecast.devices["cpu"].weights_bytes
    assert weights == candidate.size_bytes + 2 * embedding_parameters(candidate.shape)
    assert any("kept 4-bit in PyTorch's int4 CPU kernel" in r and "dequantized to fp32" in r for r in plan.reasons)


def test_awq_folder_on_a_gpu_keeps_4_bit_weights_and_the_pool_follows_the_fraction(awq_dir: Path) -> None:
    candidate = folder_candidate(awq_dir)
    plan = plan_folder(RTX_4090, candidate, context=512)
    assert plan.fits and plan.n_gpu_layers == plan.n_layers + 1 and set(plan.forecast.devices) == {"cuda:0"}
    gpu = plan.forecast.devices["cuda:0"]
    assert gpu.weights_bytes == candidate.size_bytes
    half_share = TorchOptions(gpu_memory_fraction=0.5)
    half = plan_folder(RTX_4090, candidate, context=512, options=half_share).forecast.devices["cuda:0"]
    assert half.kv_cache_bytes / gpu.kv_cache_bytes == pytest.approx(0.5 / 0.9, rel=0.01)
    assert any("90% of the GPU memory" in r for r in plan.reasons)


def test_a_70b_dense_folder_does_not_fit_and_says_what_would(tmp_path: Path) -> None:
    candidate = folder_candidate(big_folder(tmp_path / "big"))
    for machine in (CPU, RTX_4090):
        plan = plan_folder(machine, candidate, context=8192)
        assert not plan.fits
        assert any(r.startswith("Does not fit") and "AWQ 4-bit checkpoint or a GGUF file" in r for r in plan.reasons)


def test_unsupported_checkpoints_and_a_missing_engine_never_fit(tmp_path: Path, awq_dir: Path) -> None:
    bnb = folder_candidate(big_folder(tmp_path / "bnb", {"quant_method": "bitsandbytes"}))
    assert not plan_folder(RTX_4090, bnb).fits
    assert any("BITSANDBYTES checkpoints are not supported" in r for r in plan_folder(RTX_4090, bnb).reasons)
    no_torch = plan_folder(CPU, folder_candidate(awq_dir), torch_ok=False)
    assert not no_torch.fits and any("not installed" in r for r in no_torch.reasons)


def test_the_load_planner_plans_a_model_folder(awq_dir: Path) -> None:
    settings = LoadSettings(512, torch=TorchOptions(gpu_memory_fraction=0.6))
    planned = LoadPlanner(profile_for("RTX 4090", ram_gib=64)).plan_load(str(awq_dir), settings)
    assert planned.plan is not None and planned.plan.format == "awq" and planned.plan.fits
    assert planned.request.forecast == planned.plan.forecast.to_dict()
    assert planned.request.torch.gpu_memory_fraction == 0.6 and planned.request.path == str(awq_dir)
    assert any("60% of the GPU memory" in r for r in planned.plan.reasons)


def test_a_pickle_only_folder_gets_no_plan_and_the_engine_says_why(tmp_path: Path) -> None:
    folder = big_folder(tmp_path / "pickles")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    planned = LoadPlanner(profile_for(ram_gib=64)).plan_load(str(folder), LoadSettings(512))
    assert planned.plan is None and planned.request.path == str(folder)


def test_tailor_plan_explains_a_model_folder(awq_dir: Path, tmp_path: Path) -> None:
    result = subprocess.run([TAILOR, "plan", "--file", str(awq_dir), "--ram", "64", "--ctx", "512"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Fits: AWQ") and "PyTorch engine" in result.stdout
    result = subprocess.run([TAILOR, "plan", "--file", str(big_folder(tmp_path / "big")), "--json",
                             "--gpu-name", "RTX 4090"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["fits"] is False and d["format"] == "safetensors" and d["n_gpu_layers"] == 81
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    result = subprocess.run([TAILOR, "plan", "--file", str(empty)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("tailor: error: ")
    assert len(result.stderr.strip().splitlines()) == 1

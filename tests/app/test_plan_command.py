"""`tailor plan`, run as the installed command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TAILOR = str(Path(sys.executable).with_name("tailor"))


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TAILOR, "plan", *args], capture_output=True, text=True, timeout=60)


def test_plan_for_the_starter_model_on_this_machine(starter_model: Path):
    result = plan("--file", str(starter_model), "--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["fits"] is True and d["format"] == "gguf" and d["quant"] == "Q4_1"
    assert d["n_layers"] == 30 and d["context"] == 4096 and d["kv_type"] == "f16"
    f = d["forecast"]
    assert f["total_bytes"] == f["weights_bytes"] + f["kv_cache_bytes"] + f["compute_bytes"] + f["overhead_bytes"]
    assert f["kv_cache_bytes"] == 30 * 4096 * 192 * 2 * 2
    assert d["reasons"]


def test_plan_for_another_machine_offloads_everything(starter_model: Path):
    result = plan("--file", str(starter_model), "--json", "--gpu-name", "RTX 4090", "--kv", "q8_0", "--ctx", "8192")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["n_gpu_layers"] == d["n_layers"] + 1
    assert set(d["forecast"]["devices"]) == {"cpu", "cuda:0"}
    assert "RTX 4090" in d["reasons"][0] and "8.9" in d["reasons"][0]
    assert not any("trained for" in r for r in d["reasons"])  # 8,192 is within its training


def test_human_output_lists_the_reasons(starter_model: Path):
    result = plan("--file", str(starter_model))
    assert result.returncode == 0
    assert result.stdout.startswith("Fits: GGUF Q4_1") and "Why:" in result.stdout


def test_bad_file_is_one_line_and_nonzero(truncated_model: Path, not_a_model: Path):
    for path in (truncated_model, not_a_model):
        result = plan("--file", str(path))
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tailor: error: ") and path.name in lines[0]


def test_unknown_gpu_without_memory_is_a_clear_error(starter_model: Path):
    result = plan("--file", str(starter_model), "--gpu-name", "Voodoo 5")
    assert result.returncode == 1 and "tailor: error:" in result.stderr and "Traceback" not in result.stderr

"""`tailor hw`: text and JSON on this machine, the GPU lines, the subparser, no Qt."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import psutil
import pytest

from app.cli.hw import add_hw_parser, run_hw
from app.services.planning.profile_text import format_profile
from models.hardware.profile import GIB, HardwareProfile, detect_hardware, profile_for
from tests.fixtures.fake_nvml import OneGpuNvml
from tests.paths import REPO

PROFILE_FIELDS = {
    "gpus",
    "ram_total_bytes",
    "ram_available_bytes",
    "cpu_physical_cores",
    "cpu_logical_cores",
    "cpu_name",
    "source",
    "llama",
}
GPU_FIELDS = {
    "index",
    "name",
    "uuid",
    "compute_capability",
    "total_bytes",
    "free_bytes",
    "used_bytes",
    "used_by_others_bytes",
    "driver_version",
    "cuda_version",
}
HAS_GPU = detect_hardware().has_gpu


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tailor")
    add_hw_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_subparser_sets_run_hw() -> None:
    args = _parse(["hw", "--json"])
    assert args.command == "hw" and args.json is True and args.func is run_hw
    assert _parse(["hw"]).json is False


def test_json_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_hw(_parse(["hw", "--json"])) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one JSON object on one line
    data = json.loads(out)
    assert set(data) == PROFILE_FIELDS
    assert data["ram_total_bytes"] == psutil.virtual_memory().total
    assert data["cpu_logical_cores"] == psutil.cpu_count(logical=True)
    for gpu in data["gpus"]:
        assert set(gpu) == GPU_FIELDS
    assert HardwareProfile.from_dict(data).has_gpu is HAS_GPU


@pytest.mark.skipif(HAS_GPU, reason="this machine has an NVIDIA GPU")
def test_text_here_says_no_gpu_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_hw(_parse(["hw"])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("No NVIDIA GPU found (") and lines[0].endswith(")")
    assert lines[0] != "No NVIDIA GPU found ()"
    assert lines[1].startswith("llama.cpp devices: ") and "CPU (" in lines[1]
    assert lines[2].startswith("RAM: ") and "GiB available" in lines[2]
    assert lines[3].startswith("CPU: ") and f"{psutil.cpu_count(logical=True)} threads" in lines[3]


def test_text_and_json_with_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_hw(_parse(["hw"]), nvml=OneGpuNvml()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "GPU 0: NVIDIA GeForce RTX 4090, 24.0 GiB (22.0 GiB free), 1.5 GiB used by other processes,"
        " compute capability 8.9"
    )
    assert lines[1] == "NVIDIA driver 550.54.15, CUDA 12.4"
    assert "No NVIDIA GPU" not in "\n".join(lines)
    run_hw(_parse(["hw", "--json"]), nvml=OneGpuNvml())
    gpu = json.loads(capsys.readouterr().out)["gpus"][0]
    assert gpu["compute_capability"] == [8, 9] and gpu["total_bytes"] == 24 * GIB


def test_text_of_a_hypothetical_machine_and_a_skipped_gpu() -> None:
    text = format_profile(profile_for("RTX 3060", ram_gib=32))
    assert text.splitlines()[0] == "GPU 0: RTX 3060, 12.0 GiB (12.0 GiB free), compute capability 8.6"
    assert "RAM: 32.0 GiB (32.0 GiB available)" in text
    assert "NVIDIA driver" not in text  # unknown for a hypothetical card
    profile = profile_for("RTX 4090")
    skipped = HardwareProfile(
        **{**profile.to_dict(), "gpus": profile.gpus, "source": "nvml (GPU 1 skipped: lost)"}
    )
    assert "Note: GPU 1 skipped: lost" in format_profile(skipped)


def test_command_imports_no_qt() -> None:
    code = (
        "import argparse, sys; from app.cli.hw import run_hw; "
        "run_hw(argparse.Namespace(json=True)); "
        "assert not any(m.startswith('PySide6') for m in sys.modules), 'Qt imported'"
    )
    root = REPO
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root
    )
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)) == PROFILE_FIELDS

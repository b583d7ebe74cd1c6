"""An NVIDIA GPU beside a CPU-only llama.cpp: the CLI and the window plan on the CPU and say why.

NVML's answers are faked (an RTX 4090); llama.cpp's device list is real, read by the real probe from
the llama-cpp-python installed here, which CI builds without CUDA.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.cli.hw import add_hw_parser, run_hw
from app.cli.plan import add_plan_parser, run_plan
from app.gui.dialogs.welcome import FirstRunDialog
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.machine import detect_machine
from engine.device_probe import gpu_backend_installed
from tests.fixtures.fake_nvml import OneGpuNvml

pytestmark = pytest.mark.skipif(gpu_backend_installed(), reason="needs a llama-cpp-python built without GPU backends")
NOTE = "llama.cpp here was built without CUDA: run `make gpu` to use your NVIDIA GeForce RTX 4090."


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tailor")
    commands = parser.add_subparsers(dest="command")
    add_plan_parser(commands)
    add_hw_parser(commands)
    return parser.parse_args(argv)


def test_the_real_probe_reports_a_cpu_only_build():
    profile = detect_machine(OneGpuNvml())
    assert profile.has_gpu and profile.llama is not None and profile.llama.known
    assert not profile.llama.gpu_offload and not profile.llama.has_cuda_backend
    assert [d.kind for d in profile.llama.devices] == ["cpu"]


def test_tailor_plan_runs_on_the_cpu_and_says_what_to_run(starter_model: Path, capsys: pytest.CaptureFixture[str]):
    assert run_plan(_args(["plan", "--file", str(starter_model)]), nvml=OneGpuNvml()) == 0
    out = capsys.readouterr().out
    assert "all layers on the CPU" in out
    why = out.split("Why:\n", 1)[1].splitlines()
    assert why[0] == f"  - {NOTE}"


def test_tailor_hw_shows_llama_cpps_devices_beside_nvml(capsys: pytest.CaptureFixture[str]):
    assert run_hw(_args(["hw"]), nvml=OneGpuNvml()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("GPU 0: NVIDIA GeForce RTX 4090")
    assert any(line.startswith("llama.cpp devices: CPU (") and "without GPU offload" in line for line in lines)
    assert f"Note: {NOTE}" in lines


def test_the_welcome_says_it_and_picks_for_ram(qtbot):
    dialog = FirstRunDialog(detect=lambda: detect_machine(OneGpuNvml()))
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.detected, timeout=30_000):
        dialog.show()
    assert NOTE in dialog.hardware_text()
    assert dialog.pick is not None and "of RAM to spare" in dialog.pick.reason and "make gpu" in dialog.pick.reason


def test_the_window_loads_on_the_cpu_and_the_status_bar_and_memory_panel_say_why(qtbot, make_window):
    window = make_window(start=False)
    window.session.model.planner = LoadPlanner(detect_machine(OneGpuNvml()))
    with qtbot.waitSignal(window.controller.loaded, timeout=60_000):
        window.session.start()
    plan = window.session.plan
    assert plan.n_gpu_layers == 0 and plan.reasons[0] == NOTE
    assert window.plan_label.text().startswith("CPU (GPU unused)")
    assert window.plan_label.toolTip().splitlines()[0] == NOTE
    panel = window.memory_page.memory
    qtbot.waitUntil(lambda: NOTE in panel.status_label.text(), timeout=10_000)

"""Two GPUs end to end above the engine: the planner asks for the plan's split, and the memory panel
draws one bar per card from the report the engine builds (NVML's figures per card, llama.cpp's buffers
as its CUDA build names them)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from app.gui.side_panel.memory.bar import GB
from app.gui.side_panel.memory.panel import MemoryPanel
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.device_memory import DeviceMeter, build_report
from engine.gguf.log_bridge import BufferSizes
from engine.gguf.memory_report import parts_by_device
from models.hardware.profile import GIB, detect_hardware
from tests.fixtures.fake_nvml import FakeNvml, OneGpuNvml, TwoGpuNvml, rtx_4090

MIB = 1024**2


def two_gpu_profile():
    return replace(detect_hardware(TwoGpuNvml()), ram_available_bytes=64 * GIB)


def test_the_planner_asks_the_engine_for_the_plans_split(starter_model: Path, tmp_path: Path):
    planned = LoadPlanner(two_gpu_profile(), status_dir=tmp_path).plan_load(str(starter_model), LoadSettings(2048))
    assert planned.plan is not None and planned.plan.tensor_split == (0.5, 0.5)
    assert planned.request.tensor_split == (0.5, 0.5) and planned.request.n_gpu_layers == 31
    assert set(planned.request.forecast["devices"]) == {"cpu", "cuda:0", "cuda:1"}
    one = LoadPlanner(replace(detect_hardware(OneGpuNvml()), ram_available_bytes=64 * GIB), status_dir=tmp_path)
    assert one.plan_load(str(starter_model), LoadSettings(2048)).request.tensor_split == ()


@pytest.fixture
def panel(qtbot) -> MemoryPanel:
    widget = MemoryPanel()
    qtbot.addWidget(widget)
    widget.resize(420, 700)
    widget.show()
    return widget


def test_two_cards_get_two_bars_with_each_cards_own_memory(panel: MemoryPanel, starter_model: Path, tmp_path: Path,
                                                            qtbot):
    pid = os.getpid()
    # The engine process holds 1.2 GiB on the first card and 0.9 GiB on the second (NVML's per-process figure).
    nvml = FakeNvml(rtx_4090(21.0, "GPU-a", {pid: 1200 * MIB, 77: 1024 * MIB}), rtx_4090(22.5, "GPU-b", {pid: 900 * MIB}))
    buffers = BufferSizes()
    for kind, backend, nbytes in [("weights", "CPU_Mapped", 40 * MIB), ("weights", "CUDA0", 700 * MIB),
                                  ("weights", "CUDA1", 600 * MIB), ("kv", "CUDA0", 200 * MIB), ("kv", "CUDA1", 180 * MIB),
                                  ("compute", "CUDA0", 90 * MIB), ("compute", "CUDA1", 110 * MIB),
                                  ("compute", "CUDA_Host", 12 * MIB)]:
        buffers.add(kind, backend, nbytes)
    meter = DeviceMeter(nvml=nvml, pid=pid)
    report = build_report(parts_by_device(buffers), meter, kv_used=512, kv_total=2048)
    meter.close()
    cards = {d.device: d for d in report.devices}
    assert set(cards) == {"cpu", "cuda:0", "cuda:1"}
    assert cards["cuda:0"].free_bytes == 21 * GIB and cards["cuda:1"].free_bytes == int(22.5 * GIB)
    assert cards["cuda:1"].other_bytes == 900 * MIB - (600 + 180 + 110) * MIB
    assert cards["cuda:1"].kv_used_bytes == 180 * MIB // 4  # a quarter of the cells hold tokens, on each card

    plan = LoadPlanner(two_gpu_profile(), status_dir=tmp_path).plan_load(str(starter_model), LoadSettings(2048)).plan
    panel.set_plan(plan)
    panel.show_report(report)
    assert list(panel.bars) == ["cuda:0", "cuda:1", "cpu"]
    # Bars added to a shown panel are shown by Qt's layout on the next turn of the event loop.
    qtbot.waitUntil(lambda: all(bar.isVisible() for bar in panel.bars.values()), timeout=5000)
    for name in ("cuda:0", "cuda:1"):
        bar = panel.bars[name]
        assert bar.title().startswith(f"NVIDIA GeForce RTX 4090 ({name}): ")
        assert sum(s.nbytes for s in bar.segments) == 24 * GIB
        assert {s.part.key: s.nbytes for s in bar.segments}["free"] == cards[name].free_bytes
        assert bar.forecast_bytes == plan.forecast.devices[name].total_bytes
    assert panel.bars["cuda:0"].y() < panel.bars["cuda:1"].y() < panel.bars["cpu"].y()  # GPUs first, in order
    assert panel.status_label.text().startswith("Memory per device:")
    assert f"{22.5 * GIB / GB:.2f} GB" in panel.bars["cuda:1"].labels()["free"]

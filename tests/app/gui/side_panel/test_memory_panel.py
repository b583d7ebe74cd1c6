"""The memory and performance panel, fed with real reports from the engine and the starter model."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.gui.side_panel.memory.bar import PARTS, MemoryBar, size_label
from app.gui.side_panel.memory.hardware_panel import NO_GPU, HardwarePanel
from app.gui.side_panel.memory.panel import MemoryPanel
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.client import EngineClient
from engine.protocol import ChatMessage, Done, Loaded, MemoryReport, SamplingParams
from models.hardware.profile import GpuInfo, HardwareProfile, profile_for
from models.plan.decision_tree import Plan
from tests.engine.helpers import collect, wait_for

GREEDY = SamplingParams(temperature=0.0, max_tokens=16, seed=1)


@dataclass
class Recorded:
    plan: Plan
    loaded: MemoryReport  # right after the load: no token in use
    final: MemoryReport  # right after a reply
    done: Done


@pytest.fixture(scope="module")
def recorded(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Real reports: load the starter model as the window would on a machine without GPU, send one message."""
    home = tmp_path_factory.mktemp("engine")
    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=home / "engines")
    planned = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048))
    client = EngineClient(log_path=home / "engine.log")
    client.start()
    try:
        client.load(planned.request)
        assert isinstance(wait_for(client, (Loaded,)), Loaded)
        loaded = wait_for(client, (MemoryReport,))
        reply = collect(client, client.generate([ChatMessage("user", "What is the capital of France?")], GREEDY))
        final = wait_for(client, (MemoryReport,))
    finally:
        client.shutdown()
    assert isinstance(reply.end, Done) and isinstance(loaded, MemoryReport) and isinstance(final, MemoryReport)
    assert planned.plan is not None
    return Recorded(planned.plan, loaded, final, reply.end)


@pytest.fixture
def panel(qtbot) -> MemoryPanel:
    widget = MemoryPanel()
    qtbot.addWidget(widget)
    widget.resize(420, 600)
    widget.show()
    return widget


def test_bar_parts_sum_to_the_device_total(panel: MemoryPanel, recorded: Recorded):
    panel.show_report(recorded.final)
    for device in recorded.final.devices:
        bar = panel.bars[device.device]
        assert [s.part for s in bar.segments] == list(PARTS)
        assert sum(s.nbytes for s in bar.segments) == bar.total == device.total_bytes
        assert all(s.nbytes >= 0 for s in bar.segments)


def test_labels_match_the_report(panel: MemoryPanel, recorded: Recorded):
    report = recorded.final
    panel.show_report(report)
    cpu = report.device("cpu")
    labels = panel.bars["cpu"].labels()
    total = cpu.total_bytes
    assert labels["weights"] == size_label(cpu.weights_bytes, total)
    assert labels["KV in use"] == size_label(cpu.kv_used_bytes, total)
    assert labels["KV free"] == size_label(cpu.kv_allocated_bytes - cpu.kv_used_bytes, total)
    assert labels["compute"] == size_label(cpu.compute_bytes, total)
    assert labels["engine, other"] == size_label(cpu.other_bytes, total)
    assert size_label(96_573_849, 25_276_510_208) == "0.10 GB (0.4%)"
    # The engine runs up to 4 replies at once (the window's chat and a server's clients) in that cache
    assert panel.kv_label.text() == (f"KV cache: {report.kv_tokens_used:,} / 2,048 tokens in use; "
                                     "shared by up to 4 replies at once")
    assert panel.room_label.text().startswith(f"Room for {2048 - report.kv_tokens_used:,} more tokens of context")


def test_forecast_of_the_loaded_settings_is_the_marker(panel: MemoryPanel, recorded: Recorded):
    panel.show_report(recorded.final)
    bar = panel.bars["cpu"]
    assert bar.forecast_x(400) is None
    panel.set_plan(recorded.plan)
    forecast = recorded.plan.forecast.devices["cpu"].total_bytes
    assert bar.forecast_bytes == forecast
    # Forecast and real parts agree within a few percent: the marker sits at the end of them.
    real = bar.device.weights_bytes + bar.device.kv_allocated_bytes + bar.device.compute_bytes
    assert abs(forecast - real) <= 0.05 * real
    assert bar.forecast_x(400) == pytest.approx(400 * forecast / bar.total)
    assert "dashed line" in panel.status_label.text()


def test_view_updates_on_new_reports_without_rebuilding(panel: MemoryPanel, recorded: Recorded, qtbot):
    panel.show_report(recorded.loaded)
    bar = panel.bars["cpu"]
    assert panel.kv_label.text() == "KV cache: 0 / 2,048 tokens in use; shared by up to 4 replies at once"
    assert bar.labels()["KV in use"] == "0.00 GB (0%)"
    panel.show_report(recorded.final)
    assert panel.bars["cpu"] is bar  # the same widget, new numbers
    assert not panel.kv_label.text().startswith("KV cache: 0 / 2,048 tokens in use")
    assert bar.device == recorded.final.device("cpu")
    assert not panel.grab().isNull()  # paints from the new numbers


def test_kv_line_counts_prefixes_kept_for_reuse(panel: MemoryPanel, recorded: Recorded):
    # The PyTorch engine frees a finished reply's blocks but keeps their prefix: shown beside "in use".
    panel.show_report(replace(recorded.loaded, kv_cached_tokens=48, parallel=1))
    assert panel.kv_label.text() == "KV cache: 0 / 2,048 tokens in use, 48 more kept for reuse"
    several = replace(recorded.loaded, kv_tokens_used=412, kv_sequence_tokens=(300, 112), parallel=4)
    panel.show_report(several)
    assert panel.kv_label.text() == "KV cache: 412 / 2,048 tokens in use by 2 conversations (300 + 112); up to 4 at once"


def test_with_no_gpu_the_host_view_appears(panel: MemoryPanel, recorded: Recorded, qtbot):
    # A machine without GPU reports the host alone (a CUDA build of llama.cpp adds a GPU compute buffer).
    panel.show_report(replace(recorded.final, devices=(recorded.final.device("cpu"),)))
    assert list(panel.bars) == ["cpu"]
    assert panel.bars["cpu"].title().startswith("RAM (cpu)")
    assert panel.status_label.text().startswith("No GPU in use")
    no_gpu = HardwareProfile((), 32 * 10**9, 20 * 10**9, 4, 8, "Test CPU", "none: the NVIDIA driver is not loaded")
    hardware = HardwarePanel(lambda: no_gpu)
    qtbot.addWidget(hardware)
    hardware.show()
    qtbot.waitUntil(lambda: hardware.profile is not None, timeout=5000)
    lines = hardware.text().splitlines()
    assert lines[0] == NO_GPU
    assert "RAM: 32.00 GB total · 20.00 GB available" in lines
    assert "CPU: Test CPU · 4 cores, 8 threads" in lines


def test_gpu_bar_first_and_hardware_panel_leaves_the_engine_out_of_others(panel: MemoryPanel, recorded: Recorded,
                                                                          qtbot):
    cpu = recorded.final.device("cpu")
    gpu = replace(cpu, device="cuda:0", name="NVIDIA GeForce RTX 4090", total_bytes=24 * 10**9,
                  free_bytes=20 * 10**9, prefix_cache_bytes=0)
    report = replace(recorded.final, devices=(cpu, gpu))
    panel.show_report(report)
    assert list(panel.bars) == ["cuda:0", "cpu"]
    assert sum(s.nbytes for s in panel.bars["cuda:0"].segments) == 24 * 10**9
    card = GpuInfo(0, "NVIDIA GeForce RTX 4090", "GPU-1", (8, 9), 24 * 10**9, 20 * 10**9, 4 * 10**9, "550.54",
                   "12.4", used_by_others_bytes=4 * 10**9)
    profile = HardwareProfile((card,), 64 * 10**9, 40 * 10**9, 8, 16, "Test CPU", "nvml")
    hardware = HardwarePanel(lambda: profile)
    qtbot.addWidget(hardware)
    hardware.set_engine_memory(report)
    hardware.refresh()
    qtbot.waitUntil(lambda: hardware.profile is not None, timeout=5000)
    lines = hardware.text().splitlines()
    assert lines[0] == "GPU 0: NVIDIA GeForce RTX 4090 · driver 550.54 · CUDA 12.4"
    others = (4 * 10**9 - gpu.process_bytes) / 1e9
    assert lines[1] == f"VRAM: 24.00 GB total · {others:.2f} GB used by other programs · 20.00 GB free"


def test_hardware_panel_refreshes_only_while_shown(qtbot):
    calls = []

    def detect() -> HardwareProfile:
        calls.append(1)
        return HardwareProfile((), 8 * 10**9, 4 * 10**9, 2, 2, "Test CPU", "none: no driver")

    hardware = HardwarePanel(detect, interval_ms=20)
    qtbot.addWidget(hardware)
    hardware.show()
    qtbot.waitUntil(lambda: hardware.refreshes >= 3, timeout=5000)
    hardware.hide()
    assert not hardware.timer.isActive()  # hiding stops the refreshes (shutdown() is not called)
    # A detection already running still delivers its profile, queued to this thread: let it land.
    qtbot.waitUntil(lambda: not hardware.jobs.busy and hardware.refreshes == len(calls), timeout=5000)
    detected = len(calls)
    qtbot.wait(10 * 20)  # ten refresh intervals, hidden
    assert len(calls) == detected and hardware.refreshes == detected
    hardware.show()  # shown again: at once, then every interval
    qtbot.waitUntil(lambda: hardware.refreshes >= detected + 2, timeout=5000)
    hardware.shutdown()


def test_reply_figures_and_sparkline(panel: MemoryPanel, recorded: Recorded):
    done = recorded.done
    panel.add_stats(done)
    s = done.stats
    assert panel.last_label.text().startswith(f"Last reply: TTFT {s.ttft_s:.2f} s")
    assert f"decode {s.decode_tok_s:.1f} tok/s" in panel.last_label.text()
    assert f"{s.cached_tokens:,} of {s.prompt_tokens:,} prompt tokens from cache" in panel.last_label.text()
    faster = replace(done, stats=replace(s, decode_tok_s=s.decode_tok_s * 2))
    panel.add_stats(faster)
    assert panel.sparkline.values == [s.decode_tok_s, s.decode_tok_s * 2]
    assert panel.rolling_label.text().startswith("Last 2 replies:")
    points = panel.sparkline.points()
    assert len(points) == 2 and points[1].y() < points[0].y()  # faster is higher


def test_bar_alone_handles_an_overcommitted_host(qtbot, recorded: Recorded):
    """Mapped weights are both ours and 'available': free is cut so the bar still adds up."""
    cpu = replace(recorded.final.device("cpu"), free_bytes=recorded.final.device("cpu").total_bytes)
    bar = MemoryBar()
    qtbot.addWidget(bar)
    bar.set_device(cpu)
    assert sum(s.nbytes for s in bar.segments) == cpu.total_bytes
    assert dict((s.part.key, s.nbytes) for s in bar.segments)["others"] == 0


def test_window_memory_tab_toggles_with_ctrl_shift_m_and_follows_the_engine(window, qtbot):
    page = window.memory_page
    assert not page.isVisible()
    qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(page.isVisible, timeout=2000)
    assert window.side_panel.current_key() == "memory"
    with qtbot.waitSignal(window.controller.reply_done, timeout=120_000):
        window.submit("Hello")
    qtbot.waitUntil(lambda: page.memory.last_label.text().startswith("Last reply"), timeout=5000)
    qtbot.waitUntil(lambda: page.memory.report is not None and page.memory.report.kv_tokens_used > 0, timeout=10_000)
    assert "cpu" in page.memory.bars
    assert page.memory.bars["cpu"].forecast_bytes is not None
    view = next(a for a in window.menuBar().actions() if a.text() == "&View")
    assert window.view_menu.memory_action in view.menu().actions()
    window.view_menu.memory_action.trigger()  # the memory tab was open: the side panel collapses to its rail
    assert not page.isVisible() and window.side_panel.is_collapsed()
    qtbot.waitUntil(lambda: not window.session.busy, timeout=60_000)

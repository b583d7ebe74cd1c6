"""The repo page draws each file's forecast: a bar per device (weights, KV cache, compute) against the
device's free memory, the part past the plan's limit marked. Real widgets offscreen, a fake hub on
loopback serving real tiny GGUF files and GPTQ/FP8 checkpoints; the bars' computed segments are
checked against the plan's own forecast numbers, not pixels."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QPalette

from app.gui.models_window.forecast_bar import ForecastBar, bar_colors
from app.gui.models_window.manager_window import ModelManager
from app.gui.models_window.repo_page import COL_QUANT, COL_VERDICT
from app.services.planning import pull_plan
from models.library import ModelStore
from models.plan.budget import GPU_RESERVE_BYTES, RAM_RESERVE_BYTES, SAFETY_MARGIN, card_budget
from models.plan.machine import Machine
from models.units import GIB
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub

fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants
REPO = "org/Tiny-GGUF"
CPU_ONLY = Machine(None, 0, 0, None, 16 * GIB)
# RAM for everything else and one MiB more: every file's forecast is under the free memory and over the
# plan's limit (which keeps that reserve); and less RAM free than the smallest file's forecast.
UNDER_THE_LIMIT = Machine(None, 0, 0, None, RAM_RESERVE_BYTES + 1024**2)
UNDER_THE_FILE = Machine(None, 0, 0, None, 32 * 1024**2)
BIG_GPU = Machine("RTX 4090", 24 * GIB, 24 * GIB, (8, 9), 64 * GIB)
H100 = Machine("NVIDIA H100 80GB HBM3", 80 * GIB, 80 * GIB, (9, 0), 128 * GIB)
WAIT_MS = 30_000


@pytest.fixture
def open_page(qtbot, fake_hub: FakeHub, tiny_quants: dict[str, Path], tmp_path: Path):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    managers: list[ModelManager] = []

    def open_(machine: Machine, repo: str = REPO):
        manager = ModelManager(lambda path: None, store=ModelStore(tmp_path / f"data{len(managers)}"),
                               machine_factory=lambda: machine)
        qtbot.addWidget(manager)
        managers.append(manager)
        manager.show()
        with qtbot.waitSignal(manager.repo_page.loaded, timeout=WAIT_MS):
            manager.open_repo(repo)
        return manager.repo_page

    yield open_
    for manager in managers:
        manager.shutdown()


def free_and_limit(machine: Machine, device: str) -> tuple[int, int]:
    """The device's free memory and what the plan may use of it, worked out here from the budget's rules."""
    if device == "cpu":
        free, reserve = machine.ram_available_bytes, RAM_RESERVE_BYTES
    else:
        free, reserve = machine.gpus[int(device.split(":")[1])].free_bytes, GPU_RESERVE_BYTES
    return free, int(max(0, free - reserve) * (1 - SAFETY_MARGIN))


def check_bar_against_the_forecast(bar: ForecastBar, plan, machine: Machine) -> None:  # noqa: ANN001 - a Plan
    devices = plan.forecast.devices
    # GPUs first, then the CPU: every device of the forecast, none more.
    assert [lane.room.device for lane in bar.lanes] == sorted(devices, key=lambda d: (d == "cpu", d))
    for lane in bar.lanes:
        d = devices[lane.room.device]
        free, limit = free_and_limit(machine, lane.room.device)
        scale = max(free, d.total_bytes)
        assert lane.scale == scale
        parts = {s.key: s for s in lane.segments}
        expected = {"weights": d.weights_bytes, "kv": d.kv_cache_bytes, "compute": d.compute_bytes}
        assert {k: parts[k].nbytes for k in expected} == expected
        for key, nbytes in expected.items():
            assert parts[key].width == pytest.approx(nbytes / scale)
        # Stacked: each segment starts where the one before it ends, from the left edge.
        starts = [s.start for s in lane.segments]
        ends = [s.start + s.width for s in lane.segments]
        assert starts[0] == 0 and starts[1:] == pytest.approx(ends[:-1])
        assert ends[-1] == pytest.approx(d.total_bytes / scale)
        assert lane.free == pytest.approx(free / scale) and lane.limit == pytest.approx(limit / scale)


def test_each_planned_file_has_a_bar_matching_its_forecast_on_the_cpu(open_page):
    page = open_page(CPU_ONLY)
    rows = {g.group.quant: page.row_of(g.group.name) for g in page.verdicts() if g.plan is not None}
    assert set(rows) == {"F16", "Q8_0", "Q4_K_M"}
    for row in rows.values():
        g = page.verdicts()[row]
        bar = page.forecast_bar(row)
        assert bar is not None and bar.isVisible()
        check_bar_against_the_forecast(bar, g.plan, CPU_ONLY)
        (lane,) = bar.lanes
        assert lane.room.label == "CPU" and lane.over is None  # 16 GiB of RAM: room to spare
        assert lane.segments[0].width > 0 and lane.free == 1.0
        # The numbers in GiB, for the mouse and for a screen reader.
        total = g.plan.forecast.devices["cpu"].total_bytes
        assert f"= {total / GIB:.2f} GiB, of 16.00 GiB free" in bar.toolTip() and "left" in bar.toolTip()
        assert bar.accessibleDescription() == bar.toolTip().replace("\n", "; ")
        assert g.group.name in bar.accessibleName()
        assert page.table.rowHeight(row) >= bar.sizeHint().height()
    # The bars differ as the files do: F16's weights take the most room.
    widths = {q: page.forecast_bar(r).lanes[0].segments[0].width for q, r in rows.items()}
    assert widths["F16"] > widths["Q8_0"] > widths["Q4_K_M"]
    projector = next(g for g in page.verdicts() if g.group.format == "mmproj")
    assert page.forecast_bar(page.row_of(projector.group.name)) is None  # no plan, no bar


@pytest.mark.parametrize("machine", [UNDER_THE_LIMIT, UNDER_THE_FILE], ids=["over-the-limit", "over-free-memory"])
def test_a_file_too_big_shows_how_far_over_the_limit_it_is(open_page, machine: Machine):
    page = open_page(machine)
    row = page.row_of("F16")
    g = page.verdicts()[row]
    assert page.table.item(row, COL_VERDICT).text() == "too large"
    bar = page.forecast_bar(row)
    check_bar_against_the_forecast(bar, g.plan, machine)
    (lane,) = bar.lanes
    total = g.plan.forecast.devices["cpu"].total_bytes
    free, limit = free_and_limit(machine, "cpu")
    # The lane stands for the free memory, or for the forecast where that is more.
    assert lane.scale == max(free, total) and (lane.free < 1.0) == (total > free)
    # Hatched from the plan's limit to the forecast's end.
    assert lane.over is not None and lane.over.nbytes == total - limit
    assert lane.over.start == pytest.approx(limit / lane.scale)
    assert lane.over.start + lane.over.width == pytest.approx(total / lane.scale)
    assert f"Over the plan's limit on CPU by {(total - limit) / GIB:.2f} GiB" in bar.toolTip()
    assert bar.toolTip().splitlines()[1].endswith(f"{(total - limit) / GIB:.2f} GiB over")


def test_on_a_gpu_the_bar_has_a_gpu_lane_and_a_cpu_lane(open_page):
    page = open_page(BIG_GPU)
    row = page.row_of("F16")
    g = page.verdicts()[row]
    bar = page.forecast_bar(row)
    check_bar_against_the_forecast(bar, g.plan, BIG_GPU)
    gpu, cpu = bar.lanes
    assert (gpu.room.label, gpu.room.card, cpu.room.label) == ("GPU", "RTX 4090", "CPU")
    assert gpu.limit == pytest.approx(card_budget(24 * GIB) / (24 * GIB))
    # Fully offloaded: the layers' weights and the KV cache are on the GPU, the token embedding in RAM.
    assert gpu.segments[1].nbytes == g.plan.forecast.total("kv_cache_bytes") > 0 and cpu.segments[1].nbytes == 0
    assert "GPU (cuda:0, RTX 4090)" in bar.toolTip()


@pytest.mark.parametrize(("fmt", "quant_config", "quant"), [
    ("gptq", {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True}, "GPTQ 4-bit"),
    ("fp8", {"quant_method": "fp8", "weight_block_size": [128, 128]}, "FP8"),
])
def test_gptq_and_fp8_checkpoints_are_listed_with_their_forecast(open_page, fake_hub: FakeHub, monkeypatch,
                                                                 fmt: str, quant_config: dict, quant: str):
    # The PyTorch engine plans these; the page asks whether it is installed, which the test decides.
    monkeypatch.setattr(pull_plan, "torch_available", lambda: True)
    repo = f"org/Tiny-{fmt.upper()}"
    fake_hub.add_repo(repo, hub_repos.awq_repo_files({**hub_repos.AWQ_CONFIG, "quantization_config": quant_config}),
                      tags=[fmt])
    page = open_page(H100, repo)
    row = page.row_of("checkpoint")
    g = page.verdicts()[row]
    assert g.recommended and g.plan is not None and g.plan.format == fmt
    assert page.table.item(row, COL_QUANT).text().startswith(quant)
    assert page.table.item(row, COL_VERDICT).text().startswith("fits fully on GPU")
    bar = page.forecast_bar(row)
    check_bar_against_the_forecast(bar, g.plan, H100)
    assert bar.lanes[0].room.device == "cuda:0" and bar.lanes[0].segments[0].nbytes > 0


def test_the_bar_takes_its_colours_from_the_palette(qtbot):
    palette = QPalette()
    palette.setColor(QPalette.ColorRole.Highlight, QColor(10, 120, 40))
    palette.setColor(QPalette.ColorRole.Base, QColor(250, 250, 240))
    palette.setColor(QPalette.ColorRole.Link, QColor(10, 125, 45))  # too close to Highlight to tell apart
    colors = bar_colors(palette)
    assert colors["weights"] == QColor(10, 120, 40) and colors["free"] == QColor(250, 250, 240)
    assert colors["kv"] not in (colors["weights"], palette.color(QPalette.ColorRole.Link))
    palette.setColor(QPalette.ColorRole.Link, QColor(200, 30, 200))
    assert bar_colors(palette)["kv"] == QColor(200, 30, 200)
    assert colors["over"].hue() == 0 and colors["over"] != colors["weights"]

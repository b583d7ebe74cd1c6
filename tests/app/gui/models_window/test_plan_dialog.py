"""Why? on the repo page opens the file's plan in a dialog: `tailor plan`'s text (the per-device figures,
the context, the decision tree's reasons) and the room left on each device, selectable, with Copy.
Real widgets offscreen, a fake hub on loopback serving real tiny GGUF files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.gui.models_window.manager_window import ModelManager
from app.services.planning.plan_text import format_plan
from models.library import ModelStore
from models.plan.machine import Machine
from models.units import GIB
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub

fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants
REPO = "org/Tiny-GGUF"
CPU_ONLY = Machine(None, 0, 0, None, 16 * GIB)
WAIT_MS = 30_000


@pytest.fixture
def page(qtbot, fake_hub: FakeHub, tiny_quants: dict[str, Path], tmp_path: Path):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    manager = ModelManager(lambda path: None, store=ModelStore(tmp_path / "data"), machine_factory=lambda: CPU_ONLY)
    qtbot.addWidget(manager)
    manager.show()
    with qtbot.waitSignal(manager.repo_page.loaded, timeout=WAIT_MS):
        manager.open_repo(REPO)
    yield manager.repo_page
    manager.shutdown()


def press_why(qtbot, page, name: str):  # noqa: ANN001, ANN201 - a RepoPage; its PlanDialog
    qtbot.mouseClick(page.why_button(page.row_of(name)), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.plan_dialog is not None and page.plan_dialog.isVisible(), timeout=WAIT_MS)
    return page.plan_dialog


def test_why_shows_the_plan_as_tailor_plan_prints_it_with_the_room_on_each_device(qtbot, page):
    g = page.assessment.recommended
    assert g.group.quant == "Q4_K_M"
    dialog = press_why(qtbot, page, "Q4_K_M")
    text = dialog.plain_text()
    assert "Tiny-Llama-Q4_K_M.gguf" in dialog.windowTitle() and "recommended" in dialog.heading.text()
    # The CLI's text, word for word: the verdict, where the layers go, the context chosen, the
    # forecast per device, and the decision tree's reasons (the whole tree's, for the pick).
    assert text.startswith(format_plan(replace(g.plan, reasons=g.reasons)) + "\n\n")
    cpu = g.plan.forecast.devices["cpu"]
    assert f"weights {cpu.weights_bytes / GIB:6.2f} GiB  KV {cpu.kv_cache_bytes / GIB:6.2f} GiB" in text
    assert f"context {g.plan.context:,}, KV cache f16" in text
    assert "No NVIDIA GPU" in text and "Q4_K_M is the usual best" in text and "Context: auto" in text
    # Then the same numbers as the row's bar, against the RAM free and the plan's limit.
    room = text.split("\n\n", 1)[1]
    assert room.startswith("Room on each device")
    assert page.forecast_bar(page.row_of("Q4_K_M")).toolTip().splitlines()[1] in room
    assert "of 16.00 GiB free" in room and "left" in room
    assert dialog.text.isReadOnly()
    assert dialog.text.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByKeyboard


def test_copy_puts_the_whole_plan_on_the_clipboard(qtbot, page):
    dialog = press_why(qtbot, page, "F16")
    QGuiApplication.clipboard().setText("something else")
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == dialog.plain_text(), timeout=WAIT_MS)
    assert "Tiny-Llama-F16.gguf" in QGuiApplication.clipboard().text()


def test_one_dialog_shows_each_file_asked_about_and_close_hides_it(qtbot, page):
    first = press_why(qtbot, page, "F16")
    assert "Tiny-Llama-F16.gguf" in first.plain_text() and "recommended" not in first.heading.text()
    projector = next(g for g in page.verdicts() if g.group.format == "mmproj")
    second = press_why(qtbot, page, projector.group.name)
    assert second is first
    assert second.plain_text().startswith("No plan for this file:") and "projector" in second.plain_text()
    qtbot.mouseClick(second.buttons.button(second.buttons.StandardButton.Close), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not second.isVisible(), timeout=WAIT_MS)

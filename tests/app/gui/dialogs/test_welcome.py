"""The first-run welcome: shown once, the hardware found, Chat now, and the recommended download."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication, QComboBox

from app.gui.common.engine_availability import mark_torch_choices
from app.gui.dialogs.welcome import EMBEDDING_SUGGESTION, FirstRunDialog, maybe_show_first_run, storage_text
from app.gui.models_window.search_page import FILTERS
from app.services.planning.starter_picks import STARTER_PICKS, recommend
from engine.torch_available import NO_TORCH, EngineStatus
from models.hardware.profile import GIB, profile_for
from tests.fixtures import fake_hub as hub_fixtures

fake_hub = hub_fixtures.fake_hub
WAIT_MS = 30_000


def help_menu(window):
    """The window's Help menu, wherever other menus put it."""
    (menu,) = [a.menu() for a in window.menuBar().actions() if a.text() == "&Help"]
    return menu


@pytest.mark.parametrize(
    ("gpu", "vram", "ram", "low_b", "high_b", "words"),
    [
        (None, None, 8, 1.0, 3.5, "CPU"),
        (None, None, 32, 7.0, 8.0, "CPU"),
        (None, None, 64, 7.0, 8.0, "too slowly"),
        ("RTX 3060", 12, 32, 7.0, 15.0, "RTX 3060"),
        ("RTX 4090", 24, 64, 14.0, 40.0, "RTX 4090"),
    ],
)
def test_recommend_picks_the_largest_that_fits_and_says_why(gpu, vram, ram, low_b, high_b, words):
    profile = profile_for(gpu, vram, ram_gib=ram)
    pick = recommend(profile)
    assert low_b <= pick.params_b <= high_b, pick
    assert words in pick.reason and "Q4_K_M" in pick.reason and "\n" not in pick.reason
    budget = (vram * GIB) if gpu else (ram - 4) * GIB
    assert pick.q4_k_m_bytes + GIB <= budget  # the margin of ~1 GiB is kept


def test_a_machine_too_small_for_any_pick_gets_the_smallest():
    pick = recommend(profile_for(ram_gib=4))
    assert pick.params_b == min(p.params_b for p in STARTER_PICKS)
    assert "smallest" in pick.reason


def test_storage_names_the_cache_its_free_space_and_the_chats(tmp_path: Path):
    text = storage_text(tmp_path / "not" / "yet" / "hub", tmp_path / "chats.sqlite3")
    assert str(tmp_path / "not" / "yet" / "hub") in text and "GiB free" in text
    assert str(tmp_path / "chats.sqlite3") in text


def test_welcome_shows_on_the_first_start_only(qtbot, make_window, tmp_path: Path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    window = make_window(start=False)
    dialog = maybe_show_first_run(settings, window.help_menu.show_welcome)
    assert isinstance(dialog, FirstRunDialog) and dialog.isVisible() and not dialog.isModal()
    assert window.help_menu.welcome_action in help_menu(window).actions()
    qtbot.waitUntil(lambda: "RAM:" in dialog.hardware_text(), timeout=WAIT_MS)
    text = dialog.hardware_text()
    assert text.count("RAM:") == 1 and ("GPU 0:" in text or "No NVIDIA GPU found" in text)
    assert dialog.show_button.isEnabled() and dialog.pick is not None
    assert dialog.pick.repo_id in dialog.pick_label.text()
    assert "GiB free" in dialog.storage_label.text()
    dialog.close()
    again = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)  # the next start
    assert maybe_show_first_run(again, window.help_menu.show_welcome) is None and not dialog.isVisible()
    assert window.help_menu.show_welcome() is dialog and dialog.isVisible()  # Help → Welcome… still opens it


def test_chat_now_closes_the_welcome_and_focuses_the_composer(qtbot, make_window):
    window = make_window(start=False)
    dialog = window.help_menu.show_welcome()
    qtbot.waitUntil(dialog.isActiveWindow, timeout=5000)
    qtbot.mouseClick(dialog.chat_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.composer, timeout=5000)


def test_a_machine_without_gpu_is_said_plainly(qtbot):
    dialog = FirstRunDialog(detect=lambda: profile_for(ram_gib=16))
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.detected, timeout=WAIT_MS):
        dialog.show()
    assert "No NVIDIA GPU found" in dialog.hardware_text() and "error" not in dialog.hardware_text().lower()
    assert dialog.pick == recommend(profile_for(ram_gib=16))


def test_show_this_model_opens_the_models_window_on_the_pick(qtbot, make_window, fake_hub):
    window = make_window(start=False)
    dialog = window.help_menu.show_welcome()
    qtbot.waitUntil(dialog.show_button.isEnabled, timeout=WAIT_MS)
    assert dialog.pick is not None
    qtbot.mouseClick(dialog.show_button, Qt.MouseButton.LeftButton)
    manager = window.model_manager
    assert manager is not None and manager.isVisible()
    assert manager.repo_page.repo_id == dialog.pick.repo_id
    qtbot.waitUntil(lambda: "Reading" not in manager.repo_page.status.text(), timeout=WAIT_MS)
    assert manager.repo_page.status.text()  # the fake hub lacks the repo: the page says so itself


def test_welcome_names_the_engines_and_why_awq_cannot_run(qtbot, make_window):
    window = make_window(start=False)
    here = window.help_menu.show_welcome()
    assert "AWQ, GPTQ, FP8 (PyTorch)" in here.engines_label.text()  # torch is installed in the dev venv
    here.close()
    without_torch = FirstRunDialog(window, awq_status=EngineStatus(False, NO_TORCH))  # as in the default bundle
    qtbot.addWidget(without_torch)
    assert without_torch.engines_label.text() == (
        f"Engines: GGUF (llama.cpp). AWQ, GPTQ and FP8 are unavailable: {NO_TORCH}.")
    without_torch.jobs.wait()
    # Where the format is chosen (the Models window's search filter), the same reason.
    combo = QComboBox()
    qtbot.addWidget(combo)
    for label, kind in FILTERS:
        combo.addItem(label, kind)
    mark_torch_choices(combo, EngineStatus(False, NO_TORCH))
    index = combo.findData("awq")
    assert combo.itemText(index) == f"AWQ (unavailable: {NO_TORCH})"
    assert NO_TORCH in combo.itemData(index, Qt.ItemDataRole.ToolTipRole)
    assert combo.itemText(combo.findData("gptq")) == f"GPTQ (unavailable: {NO_TORCH})"
    assert combo.itemText(combo.findData("fp8")) == f"FP8 (unavailable: {NO_TORCH})"
    assert combo.itemText(combo.findData("gguf")) == "GGUF"


def test_the_welcome_suggests_an_embedding_model_for_documents(qtbot, make_window, fake_hub):
    window = make_window(start=False)
    dialog = window.help_menu.show_welcome()
    qtbot.mouseClick(dialog.embedding_button, Qt.MouseButton.LeftButton)
    manager = window.model_manager
    assert manager is not None and manager.isVisible()
    assert manager.repo_page.repo_id == EMBEDDING_SUGGESTION
    qtbot.waitUntil(lambda: "Reading" not in manager.repo_page.status.text(), timeout=WAIT_MS)
    dialog.jobs.wait()

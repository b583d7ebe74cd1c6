"""The model picker at the top of the chat: the library with verdicts, picking, a load's progress
and Cancel; against a scripted engine, then in the real window with the real engine."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QVBoxLayout, QWidget

from app.chat.hints import BUSY_HINT
from app.gui.chat_controller import ChatController
from app.gui.model_picker.picker import MORE, STEPS, ModelPicker
from app.gui.model_picker.picker_list import DiskModel, choices, loaded_line, verdict
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.library import ModelStore
from tests.fixtures.fake_engine import FakeEngine

WAIT_MS = 60_000


class ChatWindow(QMainWindow):
    """What the picker has in the main window: the controller, the session, show_models, and an empty row
    at the top of the chat column."""

    def __init__(self, controller: ChatController):
        super().__init__()
        self.controller, self.session = controller, controller.session
        self.models_shown = 0
        column = QVBoxLayout(central := QWidget())
        self.chat_header_layout = QHBoxLayout()
        column.addLayout(self.chat_header_layout)
        self.setCentralWidget(central)

    def show_models(self) -> None:
        self.models_shown += 1


def install_model_picker(window: ChatWindow, library: ModelStore) -> ModelPicker:
    """A picker over `library`, put and wired as MainWindow does: at the top of the chat, Get more models…
    opening the Models window."""
    picker = window.model_picker = ModelPicker(window.controller, library, parent=window)
    window.chat_header_layout.addWidget(picker, 1)
    picker.more_requested.connect(window.show_models)
    picker.refresh_models()
    return picker


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "Broken.Q8_0.gguf"
    path.write_bytes(b"GGUF" + b"\xff" * 64)  # a GGUF's magic, then no header the planner can read
    return path


@pytest.fixture
def library(tmp_path: Path, starter_model: Path, broken: Path) -> ModelStore:
    """A library with the starter model and a broken file, imported (no hub cache)."""
    store = ModelStore(tmp_path / "data", tmp_path / "hub")
    store.import_gguf(starter_model)
    store.import_gguf(broken)
    return store


@pytest.fixture
def scripted(qtbot, tmp_path: Path, starter_model: Path):
    """(window, engine): a ChatWindow over a scripted engine on a machine with an RTX 4090."""
    engine = FakeEngine()
    store = ChatStore(tmp_path / "chats.sqlite3")
    planner = LoadPlanner(profile_for("RTX 4090", ram_gib=16), status_dir=tmp_path)
    controller = ChatController(store, str(starter_model), planner, lambda _deliver: engine)
    engine.handle = controller.session.handle  # on this (the GUI) thread: signals are emitted at once
    controller.session.open_conversation(store.create_conversation("Chat", ChatSettings(load=LoadSettings(n_ctx=2048))).id)
    window = ChatWindow(controller)
    qtbot.addWidget(window)
    yield window, engine
    window.model_picker.jobs.wait()
    store.close()


def listed(qtbot, picker: ModelPicker) -> list[tuple[str, object]]:
    """The drop-down's entries once the library was read again (after a listing already running)."""
    picker.refresh_models()
    qtbot.waitUntil(lambda: not picker.listing, timeout=WAIT_MS)
    return picker.items()


def test_the_drop_down_lists_the_library_with_each_verdict_then_get_more_models(qtbot, scripted, library,
                                                                              starter_model, broken):
    window, _engine = scripted
    picker = install_model_picker(window, library)
    assert window.chat_header_layout.indexOf(picker) == 0 and window.model_picker is picker
    assert listed(qtbot, picker) == [
        (f"{starter_model.name} — fits on GPU", str(starter_model)),
        (f"{broken.name} — cannot be read", str(broken)),
        ("Get more models…", MORE),
    ]
    assert picker.combo.currentIndex() == -1 and picker.combo.placeholderText() == "Switch model…"
    library.import_gguf(starter_model)  # already listed: the library lists a file once
    window.show()
    picker.combo.showPopup()  # opening the drop-down reads the library again
    assert picker.listing
    qtbot.waitUntil(lambda: not picker.listing, timeout=WAIT_MS)
    picker.combo.hidePopup()
    assert len(picker.items()) == 3


def test_each_model_is_planned_once_across_loads_and_again_when_its_file_changes(
    qtbot, scripted, library, starter_model, broken
):
    window, engine = scripted
    picker = install_model_picker(window, library)
    first = listed(qtbot, picker)
    assert picker.plans.planned == 2  # the starter model and the broken file
    window.session.start()
    engine.pump()  # Loaded: the picker reads the list again, at the chat's settings
    qtbot.waitUntil(lambda: not picker.listing, timeout=WAIT_MS)
    assert listed(qtbot, picker) == first and picker.plans.planned == 2  # nothing changed: nothing planned
    broken.unlink()
    shutil.copyfile(starter_model, broken)  # mended: now a model
    assert listed(qtbot, picker)[1] == (f"{broken.name} — fits on GPU", str(broken))
    assert picker.plans.planned == 4  # a file of the library changed: the library is planned again
    # The verdicts are at the open chat's settings.
    window.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=4096)))
    listed(qtbot, picker)
    assert picker.plans.planned == 6


def test_a_pick_while_a_reply_is_written_is_refused_with_a_notice(qtbot, scripted, library, starter_model):
    window, engine = scripted
    picker = install_model_picker(window, library)
    listed(qtbot, picker)
    window.session.start()
    engine.pump()
    assert window.session.send("Hello")
    notices: list[str] = []
    window.controller.notice.connect(notices.append)
    picker.pick(str(starter_model))
    assert len(engine.loads) == 1 and notices == [BUSY_HINT]


def test_picking_loads_the_model_and_get_more_models_opens_the_models_window(qtbot, scripted, library,
                                                                            starter_model):
    window, engine = scripted
    picker = install_model_picker(window, library)
    listed(qtbot, picker)
    window.session.start()
    picker.pick(str(starter_model))
    assert [r.path for r in engine.loads] == [str(starter_model)] * 2 and picker.combo.currentIndex() == -1
    picker.pick(MORE)
    assert window.models_shown == 1 and len(engine.loads) == 2


def test_a_load_shows_its_progress_and_cancel_stops_it_through_the_session(qtbot, scripted, library):
    window, engine = scripted
    picker = install_model_picker(window, library)
    window.show()
    engine.hold_loads = True
    window.session.start()
    assert picker.progress.isVisible() and picker.cancel_button.isVisible()
    assert picker.progress.value() == 0 and picker.current.full_text.startswith("Loading SmolLM2")
    engine.progress(0.45)
    engine.pump()
    assert picker.progress.value() == round(0.45 * STEPS) and picker.progress.format() == "Reading 45 %"
    qtbot.mouseClick(picker.cancel_button, Qt.MouseButton.LeftButton)
    assert engine.load_cancels == 1 and not picker.cancel_button.isEnabled()  # pressed once
    engine.pump()  # load_cancelled, with no model before it
    assert not picker.progress.isVisible() and not picker.cancel_button.isVisible()
    assert picker.current.full_text == "No model loaded"


def test_the_loaded_model_shows_its_quant_and_where_it_runs(qtbot, scripted, library):
    window, engine = scripted
    picker = install_model_picker(window, library)
    window.session.start()
    engine.pump()
    assert picker.current.full_text == "Scripted · Q4_1 · GPU · all 30 layers" and not picker.progress.isVisibleTo(window)
    assert "RTX 4090" in picker.current.toolTip()  # the plan's reasons


def test_verdicts_and_the_loaded_line_follow_the_plan(starter_model):
    plan = LoadPlanner(profile_for(ram_gib=16)).plan_load(str(starter_model), LoadSettings(2048)).plan
    assert verdict(plan) == ("CPU only", True)
    assert verdict(replace(plan, n_gpu_layers=12)) == ("partly on GPU (12/30 layers)", True)
    assert verdict(replace(plan, fits=False)) == ("too big", False) and verdict(None) == ("cannot be read", False)
    assert loaded_line(str(starter_model), None, replace(plan, n_gpu_layers=12)) == (
        f"{starter_model.name} · Q4_1 · GPU 12/30 layers + CPU")

    def failing(path: str):
        raise OSError("unreadable")

    (choice,) = choices([DiskModel("/x.gguf", "x")], failing)  # one bad file never hides the list
    assert (choice.text, choice.fits) == ("x — cannot be read", False)
    (choice,) = choices([DiskModel("/x.gguf", "x")], None)  # on a remote server's engine: no verdicts
    assert choice.text == "x"


def test_in_the_window_a_model_picked_loads_for_real_with_progress_and_cancel_goes_back(
    qtbot, make_window, library, starter_model, tmp_path
):
    window = make_window(start=False)
    picker = window.model_picker
    picker.store = library  # the test's library, not the standard one
    heard: list[tuple[float, str]] = []
    window.controller.load_progress.connect(lambda f, s: heard.append((f, s)))
    with qtbot.waitSignal(window.controller.loaded, timeout=WAIT_MS):
        window.session.start()
    assert heard[0] == (0.0, "reading") and heard[-1] == (1.0, "context")
    assert [f for f, _ in heard] == sorted(f for f, _ in heard)
    assert picker.current.full_text.endswith("· Q4_1 · CPU") and not picker.progress.isVisible()
    other = tmp_path / "Starter-Copy.Q4_1.gguf"
    try:  # the library resolves links: a file of its own (the same bytes, as a hard link where it can)
        os.link(starter_model, other)
    except OSError:
        shutil.copyfile(starter_model, other)
    library.import_gguf(other)
    assert (f"{other.name} — CPU only", str(other)) in listed(qtbot, picker)
    picker.pick(str(other))
    assert picker.progress.isVisible()
    with qtbot.waitSignal(window.controller.loaded, timeout=WAIT_MS) as back:
        qtbot.mouseClick(picker.cancel_button, Qt.MouseButton.LeftButton)  # the engine stops, then reloads the first
    assert back.args[0].info.path == str(starter_model) and window.session.model_path == str(starter_model)
    assert picker.current.full_text.endswith("· Q4_1 · CPU") and not picker.progress.isVisible()
    assert "was cancelled; loading" in window.statusBar().currentMessage()
    with qtbot.waitSignal(window.controller.loaded, timeout=WAIT_MS) as loaded:
        picker.pick(str(other))  # and a pick that is left alone loads
    assert loaded.args[0].info.path == str(other)
    picker.jobs.wait()

"""Chat → Export… and Import… in the window, on a real SQLite file (the engine is not started): exports
are written on a background thread in each format, an import runs on one with its progress and Cancel in
the status bar while the window goes on, and the chat list shows what came in."""

from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt

from app.gui.transfer import chat_transfer
from app.gui.transfer.export_dialog import ExportChoice, ExportDialog
from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from app.services.history.store import ChatStore
from app.services.media.intake import read_image
from app.services.transfer.export import load_chats, safe_filename, to_json
from app.services.transfer.jobs import import_chats as real_import_chats
from tests.fixtures.chatgpt import __file__ as chatgpt_fixtures

WAIT_MS = 20_000
CHATGPT_FILE = Path(chatgpt_fixtures).parent / "conversations.json"


def make_export(path: Path, count: int) -> Path:
    """Our JSON export of `count` chats of two messages each, from a history of their own; about 20 kB a
    chat, so that the file is read in several pieces and its progress moves."""
    source = ChatStore(path.with_suffix(".sqlite3"))
    for i in range(count):
        chat = source.create_conversation(f"Imported {i:02d}")
        source.add_message(chat.id, "user", f"Question {i}")
        source.add_message(chat.id, "assistant", f"Answer {i}: " + "word " * 4000)
    path.write_text(to_json(load_chats(source)), encoding="utf-8")
    source.close()
    return path


def titles(window) -> list[str]:
    return [item.text(0) for item in window.conversations.chat_items()]


@pytest.fixture
def window(make_window):
    window = make_window(start=False)
    store = window.session.store
    trip = store.create_conversation("Trip / plans")
    store.add_message(trip.id, "user", "Plan a day in Rome.")
    store.add_message(trip.id, "assistant", "Start at the **Pantheon**.\n\n```text\n9:00 Pantheon\n```")
    window.session.open_conversation(trip.id)
    window.refresh_list()
    return window


def _export(qtbot, window, monkeypatch, choice: ExportChoice, target: Path) -> str:
    """Run Export… with these answers to its dialogs; the status bar's line once it is written."""
    ran_on = []
    real = chat_transfer.export_chats

    def export_chats(*args, **kwargs):
        ran_on.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(chat_transfer, "export_chats", export_chats)
    monkeypatch.setattr(chat_transfer, "choose_export", lambda parent, title: choice)
    monkeypatch.setattr(chat_transfer, "save_file_path", lambda parent, suggested, filter_: str(target))
    monkeypatch.setattr(chat_transfer, "export_folder_path", lambda parent: str(target))
    qtbot.keyClick(window, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: not window.chat_transfer.exporting, timeout=WAIT_MS)
    assert ran_on and ran_on[0] is not threading.main_thread()  # written in the background
    return window.statusBar().currentMessage()


def test_the_dialog_offers_images_inside_the_file_for_json_alone(qtbot):
    dialog = ExportDialog(None, "Trip")
    qtbot.addWidget(dialog)
    for ext, embeddable in (("md", False), ("json", True), ("html", False)):
        dialog.format.setCurrentIndex(dialog.format.findData(ext))
        assert dialog.embed_media.isEnabled() is embeddable
        dialog.embed_media.setChecked(True)
        assert dialog.choice() == ExportChoice("chat", ext, embeddable)


def test_a_chat_s_images_go_inside_a_json_export_or_beside_it(qtbot, window, monkeypatch, tmp_path):
    picture = tmp_path / "red.png"
    Image.new("RGB", (40, 30), "red").save(picture)
    store = window.session.store
    chat = store.create_conversation("A picture")
    store.add_message(chat.id, "user", "What is it?", images=[read_image(picture)])
    window.session.open_conversation(chat.id)

    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "json", embed_media=True), tmp_path / "in.json")
    (image,) = json.loads((tmp_path / "in.json").read_text(encoding="utf-8"))["chats"][0]["messages"][0]["images"]
    assert base64.b64decode(image["data"]) == picture.read_bytes() and "file" not in image
    assert not (tmp_path / "in-media").exists() and said == f"Exported 1 chat to {tmp_path / 'in.json'}"

    _export(qtbot, window, monkeypatch, ExportChoice("chat", "json"), tmp_path / "beside.json")
    (image,) = json.loads((tmp_path / "beside.json").read_text(encoding="utf-8"))["chats"][0]["messages"][0]["images"]
    assert "data" not in image and (tmp_path / image["file"]).read_bytes() == picture.read_bytes()

    # an image whose stored file is gone is left out, and the status bar says so
    for stored in store.media.folder.rglob("*.png"):
        stored.unlink()
    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "json", embed_media=True), tmp_path / "gone.json")
    assert said.startswith(f"Exported 1 chat to {tmp_path / 'gone.json'}; 1 attached file left out")


def test_export_writes_this_chat_or_all_chats_in_each_format(qtbot, window, monkeypatch, tmp_path):
    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "md"), tmp_path / "rome")
    markdown = (tmp_path / "rome.md").read_text(encoding="utf-8")  # the extension added to a bare name
    assert "Plan a day in Rome." in markdown and "```text\n9:00 Pantheon\n```" in markdown
    assert said == f"Exported 1 chat to {tmp_path / 'rome.md'}"

    everything = window.session.store.list_conversations()
    said = _export(qtbot, window, monkeypatch, ExportChoice("all", "json"), tmp_path / "all.json")
    document = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert document["format"] == "tailor-chats" and len(document["chats"]) == len(everything) == 2
    assert said.startswith("Exported 2 chats to")

    folder = tmp_path / "pages"
    folder.mkdir()
    _export(qtbot, window, monkeypatch, ExportChoice("each", "html"), folder)
    store = window.session.store
    expected = {safe_filename(c.title, store.conversation_uid(c.id), "html") for c in everything}
    assert {p.name for p in folder.iterdir()} == expected  # "Trip / plans": no path separator in its name
    page = next(p for p in folder.iterdir() if p.name.startswith("Trip"))
    assert "<!DOCTYPE html>" in page.read_text(encoding="utf-8")

    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "md"), tmp_path / "missing" / "x.md")
    assert said.startswith("Export failed: Cannot write") and not (tmp_path / "missing").exists()
    assert window.chat_transfer.export_action.isEnabled()


def test_an_export_replaces_files_only_when_the_user_agrees(qtbot, window, monkeypatch, tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    _export(qtbot, window, monkeypatch, ExportChoice("each", "md"), folder)
    pages = sorted(folder.iterdir())
    for page in pages:
        page.write_text("edited by hand", encoding="utf-8")
    asked: list[str] = []
    monkeypatch.setattr(chat_transfer, "confirm_replace", lambda parent, text: asked.append(text) or False)
    said = _export(qtbot, window, monkeypatch, ExportChoice("each", "md"), folder)
    assert said == "Export cancelled: nothing was replaced."
    assert len(asked) == 1 and asked[0].startswith(f"2 files of these chats already exist in {folder}:")
    assert all(p.read_text(encoding="utf-8") == "edited by hand" for p in pages)
    monkeypatch.setattr(chat_transfer, "confirm_replace", lambda parent, text: asked.append(text) or True)
    said = _export(qtbot, window, monkeypatch, ExportChoice("each", "md"), folder)
    assert said == f"Exported 2 chats to {folder}" and len(asked) == 2
    assert all(p.read_text(encoding="utf-8").startswith("# ") for p in pages)

    # The save dialog asked about "notes", not "notes.md": the file with the extension is asked about here.
    notes = tmp_path / "notes.md"
    notes.write_text("mine", encoding="utf-8")
    monkeypatch.setattr(chat_transfer, "confirm_replace", lambda parent, text: asked.append(text) or False)
    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "md"), tmp_path / "notes")
    assert asked[-1] == f"notes.md already exists in {tmp_path}. Replace it?" and notes.read_text() == "mine"
    # A name the save dialog confirmed is replaced without a second question.
    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "md"), notes)
    assert said == f"Exported 1 chat to {notes}" and len(asked) == 3 and notes.read_text().startswith("# ")
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    said = _export(qtbot, window, monkeypatch, ExportChoice("chat", "md"), fifo)
    assert said == f"Export failed: Cannot write {fifo}: it is a FIFO (named pipe); Tailor writes only regular files"


def test_a_chat_imported_with_hostile_settings_opens_and_answers(qtbot, make_window, monkeypatch, tmp_path):
    from tests.app.services.transfer.test_hostile_imports import (
        HOSTILE_SETTINGS,
        _tailor_chat,
        _tailor_export,
    )

    window = make_window()
    source = tmp_path / "hostile.json"
    source.write_text(_tailor_export([_tailor_chat("Hostile", settings=HOSTILE_SETTINGS)]), encoding="utf-8")
    _start_import(qtbot, window, monkeypatch, source)
    qtbot.waitUntil(lambda: not window.chat_transfer.importing, timeout=WAIT_MS)
    assert window.statusBar().currentMessage().startswith("Imported 1 chat; 1 mended on the way in (Mended chat 1")
    chat = next(c for c in window.session.store.list_conversations() if c.title == "Hostile")
    window.session.open_conversation(chat.id)
    panel = window.settings_panel
    assert panel.system_prompt.toPlainText() == DEFAULT_SYSTEM_PROMPT and panel.temperature.value() == 0.7
    assert panel.max_tokens.value() == 512 and panel.flash_attn.currentText() == "on"
    with qtbot.waitSignal(window.controller.stream_finished, timeout=120_000) as finished:
        window.submit("Say hello.")
    assert finished.args[0].state == "complete" and finished.args[0].content, window.banner.text()


def test_the_export_dialog_offers_this_chat_only_when_one_is_open(qtbot):
    dialog = ExportDialog(None, "Trip")
    qtbot.addWidget(dialog)
    assert dialog.this_chat.isChecked() and dialog.choice() == ExportChoice("chat", "md")
    dialog.all_each.setChecked(True)
    dialog.format.setCurrentIndex(dialog.format.findData("html"))
    assert dialog.choice() == ExportChoice("each", "html")
    closed = ExportDialog(None, None)
    qtbot.addWidget(closed)
    assert not closed.this_chat.isEnabled() and closed.choice().scope == "all"


class HeldImport:
    """The real import, held on its thread at its first progress report from `hold_at` chats on (`chats`
    read by then), until `release()`: the test sees the progress and uses the window meanwhile."""

    def __init__(self, monkeypatch, hold_at: int):
        self.gate, self.held = threading.Event(), threading.Event()
        self.hold_at, self.chats = hold_at, -1
        self.threads: list[threading.Thread] = []
        monkeypatch.setattr(chat_transfer, "import_chats", self._run)

    def _run(self, db, path, on_progress, cancelled):
        self.threads.append(threading.current_thread())

        def progress(p):
            on_progress(p)
            if p.chats_done >= self.hold_at and not self.held.is_set():
                self.chats = p.chats_done
                self.held.set()
                self.gate.wait(WAIT_MS / 1000)

        return real_import_chats(db, path, progress, cancelled)

    def release(self) -> None:
        self.gate.set()


@pytest.fixture
def hold(window, monkeypatch):
    """Makes HeldImports; each is let go at the end (before the window closes), whatever the test did."""
    made: list[HeldImport] = []

    def make(hold_at: int) -> HeldImport:
        made.append(HeldImport(monkeypatch, hold_at))
        return made[-1]

    yield make
    for each in made:
        each.release()


def _start_import(qtbot, window, monkeypatch, path: Path) -> None:
    monkeypatch.setattr(chat_transfer, "import_file_path", lambda parent: str(path))
    qtbot.keyClick(window, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)


def test_an_import_runs_in_the_background_with_progress_and_fills_the_list(qtbot, window, hold, monkeypatch,
                                                                          tmp_path):
    export = make_export(tmp_path / "export.json", 60)
    held = hold(25)
    _start_import(qtbot, window, monkeypatch, export)
    bar = window.chat_transfer.progress
    qtbot.waitUntil(lambda: held.held.is_set() and f"{held.chats} chats" in bar.label.text(), timeout=WAIT_MS)
    assert bar.isVisible() and 0 < bar.bar.value() < bar.bar.maximum()
    assert "MB" in bar.label.text() and bar.cancel_button.isEnabled()
    assert held.threads[0] is not threading.main_thread()
    # The window goes on meanwhile: typing works, and a second import is refused.
    qtbot.keyClicks(window.composer, "still here")
    assert window.composer.toPlainText() == "still here"
    window.chat_transfer.import_()
    assert "An import is running" in window.statusBar().currentMessage()
    held.release()
    qtbot.waitUntil(lambda: not window.chat_transfer.importing, timeout=WAIT_MS)
    assert not bar.isVisible()
    assert window.statusBar().currentMessage() == "Imported 60 chats."
    assert {f"Imported {i:02d}" for i in range(60)} <= set(titles(window))  # the list was drawn again
    assert len(window.session.store.list_conversations()) == 62

    hold(10**9)  # not held: imported again, every chat is there already
    _start_import(qtbot, window, monkeypatch, export)
    qtbot.waitUntil(lambda: not window.chat_transfer.importing, timeout=WAIT_MS)
    assert window.statusBar().currentMessage() == "Imported 0 chats (60 skipped: already there)."
    assert len(window.session.store.list_conversations()) == 62


def test_cancel_stops_the_import_after_the_chat_it_is_on(qtbot, window, hold, monkeypatch, tmp_path):
    export = make_export(tmp_path / "export.json", 60)
    held = hold(25)
    _start_import(qtbot, window, monkeypatch, export)
    bar = window.chat_transfer.progress
    qtbot.waitUntil(held.held.is_set, timeout=WAIT_MS)
    qtbot.waitUntil(bar.isVisible, timeout=WAIT_MS)
    qtbot.mouseClick(bar.cancel_button, Qt.MouseButton.LeftButton)
    assert not bar.cancel_button.isEnabled() and "Cancelling" in bar.label.text()
    held.release()
    qtbot.waitUntil(lambda: not window.chat_transfer.importing, timeout=WAIT_MS)
    assert 25 <= held.chats < 60
    assert window.statusBar().currentMessage() == f"Import cancelled. Imported {held.chats} chats."
    assert len(window.session.store.list_conversations()) == 2 + held.chats  # the chats imported before stay
    assert len([t for t in titles(window) if t.startswith("Imported ")]) == held.chats


def test_chatgpts_export_imports_and_a_bad_file_says_why(qtbot, window, monkeypatch, tmp_path):
    _start_import(qtbot, window, monkeypatch, CHATGPT_FILE)
    qtbot.waitUntil(lambda: not window.chat_transfer.importing, timeout=WAIT_MS)
    assert window.statusBar().currentMessage() == "Imported 3 chats."
    assert {"Lisbon in a day", "Reading a chart", "Cut short"} <= set(titles(window))

    before = window.session.store.list_conversations()
    bad = tmp_path / "notes.json"
    bad.write_text("These are my notes, not an export.", encoding="utf-8")
    _start_import(qtbot, window, monkeypatch, bad)
    qtbot.waitUntil(lambda: not window.chat_transfer.importing, timeout=WAIT_MS)
    said = window.statusBar().currentMessage()
    assert str(bad) in said and "not a Tailor chat export" in said and "\n" not in said
    assert window.session.store.list_conversations() == before and not window.chat_transfer.progress.isVisible()


def test_nothing_is_imported_into_a_history_that_cannot_be_saved_to(qtbot, window, monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(chat_transfer, "import_file_path", lambda parent: asked.append(1) or "")
    monkeypatch.setattr(type(window.session.store), "writable", property(lambda store: False))
    window.chat_transfer.import_()
    assert asked == [] and window.statusBar().currentMessage() == chat_transfer.NOT_WRITABLE

"""The window over a chat history that is read-only, on a full disk or damaged: real Qt widgets
offscreen and real SQLite files; the engine is never started (sending is off anyway)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.gui.main import build_window
from app.gui.main_window import MainWindow
from app.services.history.backup import backup_path, list_backups, make_backup
from app.services.history.opening import open_sqlite
from app.services.history.store import SCHEMA_VERSION, ChatStore
from tests.app.gui import theme_fixtures
from tests.app.gui.entry_point import run_main
from tests.app.services.history.history_files import Medium, damage_page, fill_history, old_history, pages_of

app = theme_fixtures.app  # main() installs the theme on the application: put back afterwards

TIMEOUT_MS = 30_000


@pytest.fixture
def open_window(qtbot, tmp_path) -> Callable[..., MainWindow]:
    """A window over `tmp_path/chats.sqlite3` on the given medium, engine not started."""

    def make(connect=open_sqlite) -> MainWindow:
        window = build_window(tmp_path / "chats.sqlite3", str(tmp_path / "model.gguf"), tmp_path / "engine.log",
                              connect=connect)
        qtbot.addWidget(window)
        window.show()
        return window

    return make


def changes_allowed(window: MainWindow) -> dict[str, bool]:
    return {
        "composer": window.composer.isEnabled(),
        "send": window.send_stop.send_button.isEnabled(),
        "new chat": window.new_action.isEnabled(),
        "new button": window.conversations.new_button.isEnabled(),
        "rename": window.conversations.rename_action.isEnabled(),
        "delete": window.conversations.delete_action.isEnabled(),
        "regenerate": window.regenerate_action.isEnabled(),
        "settings": window.settings_panel.isEnabled(),
    }


def all_(value: bool, window: MainWindow) -> bool:
    return set(changes_allowed(window).values()) == {value}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_read_only_history_opens_readable_with_sending_off_and_the_reason(open_window, tmp_path, qtbot):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, SCHEMA_VERSION)
    before = digest(path)
    medium = Medium(read_only=True)
    window = open_window(medium.connect)
    banner = window.history_banner
    assert banner.isVisible() and "read-only" in banner.text()
    assert "attempt to write a readonly database" in banner.text() and str(path) in banner.text()
    assert banner.retry_button.isVisible() and not banner.recover_button.isVisible()
    assert all_(False, window), changes_allowed(window)
    assert "Sending is off: the chat history is read-only" in window.composer.placeholderText()
    assert window.send_stop.send_button.toolTip() == window.composer.placeholderText()
    # Every chat is there to read.
    assert len(window.conversations.ids()) == len(made)
    for conversation_id, (title, texts) in zip(window.conversations.ids(), reversed(made), strict=True):
        window.conversations.selected.emit(conversation_id)
        assert window.session.current.title == title
        assert all(text in window.chat.plain_text() for text in texts)
    window.close()
    assert digest(path) == before  # nothing was written, not even the streaming reply's state

    medium.read_only = False  # the user makes it writable
    window = open_window(medium.connect)
    assert not window.history_banner.isVisible() and all_(True, window)


def test_try_again_opens_the_history_for_writing_once_it_can_be(open_window, tmp_path, qtbot):
    path = tmp_path / "chats.sqlite3"
    old_history(path, SCHEMA_VERSION)
    medium = Medium(read_only=True)
    window = open_window(medium.connect)
    window.history_banner.retry_button.click()
    assert window.history_banner.isVisible() and "Tried again: it still cannot be saved to" in window.history_banner.text()
    assert all_(False, window)
    medium.read_only = False
    with qtbot.waitSignal(window.history_banner.reopened, timeout=TIMEOUT_MS):
        window.history_banner.retry_button.click()
    assert not window.history_banner.isVisible() and all_(True, window), changes_allowed(window)
    assert window.session.store.writable
    window.new_conversation()  # a change goes to the file now
    assert len(ChatStore(path).list_conversations()) == 4


def test_a_full_disk_at_start_opens_readable_with_sending_off(open_window, tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 2)  # the upgrade needs a page: SQLite's "database or disk is full"
    window = open_window(Medium(full=True).connect)
    text = window.history_banner.text()
    assert window.history_banner.isVisible() and "full" in text and "database or disk is full" in text
    assert all_(False, window)
    assert "disk that holds the chat history is full" in window.composer.placeholderText()
    assert len(window.conversations.ids()) == len(made)
    assert made[-1][1][0] in window.chat.plain_text()  # the newest chat is open


def test_an_empty_read_only_history_opens_without_making_a_chat(open_window, tmp_path):
    ChatStore(tmp_path / "chats.sqlite3").close()
    window = open_window(Medium(read_only=True).connect)
    assert window.session.current is None and window.conversations.ids() == []
    assert all_(False, window)


def test_a_damaged_history_opens_with_the_offer_to_recover_and_recovers(open_window, tmp_path, qtbot):
    path = tmp_path / "chats.sqlite3"
    made = fill_history(path)
    page, rows_on_it = pages_of(path, "messages")[2]
    damage_page(path, page)
    damaged = path.read_bytes()
    window = open_window()
    banner = window.history_banner
    assert banner.isVisible() and "damaged" in banner.text() and "malformed" in banner.text()
    assert banner.recover_button.isVisible() and not banner.retry_button.isVisible()
    assert window.conversations.ids() == [] and all_(False, window)

    with qtbot.waitSignal(banner.reopened, timeout=TIMEOUT_MS):
        banner.recover_button.click()
    total = sum(len(texts) for texts in made.values())
    assert f"Recovered {len(made)} chat(s) with {total - rows_on_it} message(s)" in banner.text()
    assert banner.dismiss_button.isVisible() and not banner.recover_button.isVisible()
    assert all_(True, window) and len(window.conversations.ids()) == len(made)
    kept = list(tmp_path.glob("chats.damaged-*.sqlite3"))
    assert len(kept) == 1 and kept[0].read_bytes() == damaged and kept[0].name in banner.text()
    assert window.session.current is not None and window.chat.plain_text()
    banner.dismiss_button.click()
    assert not banner.isVisible()


def test_the_damaged_banner_points_at_the_backups(open_window, tmp_path):
    path = tmp_path / "chats.sqlite3"
    fill_history(path, chats=3)
    make_backup(path, date(2024, 5, 1))
    damage_page(path, pages_of(path, "messages")[0][0])
    window = open_window()
    assert str(backup_path(path, date(2024, 5, 1)).parent) in window.history_banner.text()
    assert "chats-2024-05-01.sqlite3" in window.history_banner.text()


def test_a_healthy_history_gets_todays_backup_without_holding_up_the_window(open_window, tmp_path, qtbot):
    path = tmp_path / "chats.sqlite3"
    fill_history(path, chats=3)
    window = open_window()
    assert not window.history_banner.isVisible() and all_(True, window)
    qtbot.waitUntil(lambda: bool(list_backups(path)), timeout=TIMEOUT_MS)
    (backup,) = list_backups(path)
    assert len(ChatStore(backup).list_conversations()) == 3


def test_a_backup_that_cannot_be_made_never_fails_the_start(open_window, tmp_path, qtbot, caplog):
    path = tmp_path / "chats.sqlite3"
    fill_history(path, chats=1)
    (tmp_path / "backups").write_text("a file where the folder should be")
    window = open_window()
    assert window.session.store.writable and all_(True, window)
    qtbot.waitUntil(lambda: "daily backup of the chat history failed" in caplog.text, timeout=TIMEOUT_MS)


def test_the_entry_point_opens_the_window_over_a_damaged_history(app, qtbot, tmp_path, monkeypatch):
    """`tailor` itself: no traceback and no exit, the window with its banner."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = tmp_path / "chats.sqlite3"
    fill_history(path, chats=3)
    damage_page(path, pages_of(path, "messages")[0][0])
    seen: list[str] = []

    def close_when_shown() -> None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, MainWindow) and widget.isVisible():
                seen.append(widget.history_banner.text() if widget.history_banner.isVisible() else "")
                widget.close()
                return
        QTimer.singleShot(50, close_when_shown)

    QTimer.singleShot(50, close_when_shown)
    assert run_main(["tailor", "--db", str(path), "--model", str(tmp_path / "none.gguf")], limit_ms=60_000) == 0
    assert len(seen) == 1 and "damaged" in seen[0]

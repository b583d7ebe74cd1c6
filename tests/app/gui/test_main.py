"""`app.gui.main.main`: the real entry point opens the window, loads the model and exits cleanly."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.gui.main_window import MainWindow
from tests.app.gui import theme_fixtures
from tests.app.gui.entry_point import run_main

app = theme_fixtures.app  # main() installs the theme on the application: put back afterwards


def test_main_loads_the_starter_model_and_closes(app, qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the engine log goes here
    seen: list[MainWindow] = []

    def close_when_ready() -> None:
        for widget in QApplication.topLevelWidgets():
            if (
                isinstance(widget, MainWindow)
                and widget.isVisible()
                and "context" in widget.model_label.text()
            ):
                seen.append(widget)
                widget.close()
                return
        QTimer.singleShot(50, close_when_ready)

    QTimer.singleShot(50, close_when_ready)
    assert run_main(["tailor", "--db", str(tmp_path / "chats.sqlite3")]) == 0
    (window,) = seen
    assert "SmolLM2" in window.model_label.text() or "smollm2" in window.model_label.text().lower()
    assert not window.session.engine.running
    assert (tmp_path / "chats.sqlite3").exists()

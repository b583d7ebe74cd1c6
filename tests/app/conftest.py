"""Fixtures for the window: a real store in tmp_path and a real engine with the starter model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from app.gui.main import build_window
from app.gui.main_window import MainWindow
from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from app.services.history.store import ChatSettings
from app.services.load_settings import LoadSettings
from engine.protocol import LoadRequest

# Short, repeatable replies keep the suite quick on two cores.
QUICK = ChatSettings(system_prompt=DEFAULT_SYSTEM_PROMPT, temperature=0.0, max_tokens=24,
                     load=LoadSettings(n_ctx=2048))
LONG = ChatSettings(system_prompt=DEFAULT_SYSTEM_PROMPT, temperature=0.7, max_tokens=400,
                    load=LoadSettings(n_ctx=2048))
LONG_PROMPT = "Write a very long story about a dragon who learns to bake bread."


def with_load(settings: ChatSettings, **changes: object) -> ChatSettings:
    """`settings` with these fields of its load settings (ChatSettings.load) changed."""
    return replace(settings, load=replace(settings.load, **changes))


@pytest.fixture
def make_window(qtbot, tmp_path: Path, starter_model: Path) -> Callable[..., MainWindow]:
    """Build windows over `tmp_path/chats.sqlite3`; each is closed (engine shut down) at teardown."""
    windows: list[MainWindow] = []

    def make(start: bool = True, settings: ChatSettings = QUICK, model: Path | None = None) -> MainWindow:
        window = build_window(
            tmp_path / "chats.sqlite3", str(model or starter_model), tmp_path / "engine.log"
        )
        qtbot.addWidget(window)
        windows.append(window)
        window.session.update_settings(settings)
        window.settings_panel.set_settings(settings)
        window.show()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow, timeout=5000)
        if start:
            with qtbot.waitSignal(window.controller.loaded, timeout=60_000):
                window.session.start()
        return window

    yield make
    for window in windows:
        window.close()  # idempotent; makes sure no engine process outlives the test
        window.session.engine.shutdown()


@pytest.fixture
def window(make_window) -> MainWindow:
    return make_window()


def record_loads(window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> list[LoadRequest]:
    """The LoadRequests the window sends its engine from now on, in order.

    Recorded where they leave for the engine, not where they are planned: the model picker plans every
    model of the library on a pool thread after each load (its verdicts) and never loads one, so a
    recorder of plans would read the picker's last plan as often as the window's load.
    """
    engine, sent = window.session.model.engine, []
    load = engine.load

    def recording(request: LoadRequest) -> None:
        sent.append(request)
        load(request)

    monkeypatch.setattr(engine, "load", recording)
    return sent

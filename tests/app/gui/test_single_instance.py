"""Single instance: a second launch focuses the first window (real QLocalServer/QLocalSocket)."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest
from PySide6.QtCore import QDir
from PySide6.QtWidgets import QApplication, QWidget

from app.gui.single_instance import SingleInstance, bring_to_front, server_name
from app.services.paths import AppPaths
from tests.app.gui import theme_fixtures
from tests.app.gui.entry_point import run_main

app = theme_fixtures.app  # main() installs the theme on the application: put back afterwards

WAIT_MS = 10_000


@pytest.fixture
def name() -> str:
    return f"tailor-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def first(name: str):
    instance = SingleInstance(name)
    assert instance.claim()
    yield instance
    instance.close()


def test_a_second_launch_asks_the_first_to_show_itself(qtbot, first: SingleInstance, name: str):
    with qtbot.waitSignal(first.activation_requested, timeout=WAIT_MS):
        assert SingleInstance(name).claim() is False
    with qtbot.waitSignal(first.activation_requested, timeout=WAIT_MS):  # and again, every launch
        assert SingleInstance(name).claim() is False


def test_a_socket_left_by_a_crashed_instance_is_replaced(qtbot, name: str):
    # What a killed Tailor leaves on Unix: the socket file, with nobody listening on it.
    path = os.path.join(QDir.tempPath(), name)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(path)
    dead.close()
    assert os.path.exists(path)
    fresh = SingleInstance(name)
    try:
        assert fresh.claim() is True  # nobody answered: this one is the first instance now
        assert fresh.server is not None and fresh.server.fullServerName() == path
        with qtbot.waitSignal(fresh.activation_requested, timeout=WAIT_MS):
            assert SingleInstance(name).claim() is False
    finally:
        fresh.close()


def test_names_differ_per_data_folder(tmp_path: Path):
    a = AppPaths(tmp_path / "a", tmp_path / "logs", tmp_path / "cache")
    b = AppPaths(tmp_path / "b", tmp_path / "logs", tmp_path / "cache")
    assert server_name(a) != server_name(b) and server_name(a) == server_name(a)
    assert server_name(a).startswith("tailor-")


def test_the_first_window_comes_to_the_front(qtbot, make_window, first: SingleInstance, name: str):
    window = make_window(start=False)
    first.activation_requested.connect(lambda: bring_to_front(window))
    other = QWidget()
    qtbot.addWidget(other)
    other.show()
    other.activateWindow()
    qtbot.waitUntil(other.isActiveWindow, timeout=WAIT_MS)
    window.showMinimized()
    assert SingleInstance(name).claim() is False
    qtbot.waitUntil(lambda: window.isActiveWindow() and not window.isMinimized(), timeout=WAIT_MS)


def test_the_real_entry_point_exits_when_tailor_already_runs(app, qtbot, tmp_path: Path):
    running = SingleInstance(server_name())  # the name main() computes for this TAILOR_HOME
    assert running.claim()
    try:
        with qtbot.waitSignal(running.activation_requested, timeout=WAIT_MS):
            assert run_main(["tailor", "--db", str(tmp_path / "chats.sqlite3")]) == 0
        assert not (tmp_path / "chats.sqlite3").exists()  # no second window, no second store
        assert not [w for w in QApplication.topLevelWidgets() if w.isVisible()]
    finally:
        running.close()

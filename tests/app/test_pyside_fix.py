"""The PySide6 reference-count workaround keeps None and True alive through many calls."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal

import app.gui  # noqa: F401 (applies the workaround)


class _Emitter(QObject):
    ping = Signal(int)


def test_many_void_calls_and_emits_do_not_use_up_none_or_true():
    emitter = _Emitter()
    received = []
    emitter.ping.connect(received.append)
    for i in range(50_000):  # more than the whole count None/True start with on Python 3.11
        emitter.setObjectName("x")
        emitter.ping.emit(i)
    assert len(received) == 50_000
    if sys.version_info < (3, 12):
        assert sys.getrefcount(None) > 1_000_000 and sys.getrefcount(True) > 1_000_000

"""Guard against a PySide6 that loses references to None/True (6.12.0 on Python 3.11 does).

Such a build aborts the app with "Fatal Python error: none_dealloc" after some thousands of
void calls or emits; pyproject.toml pins PySide6 below it. This fails if the pin is lifted
to a release with the bug.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    ping = Signal(int)


def test_void_calls_and_emits_keep_the_reference_counts_of_none_and_true():
    emitter = _Emitter()
    received: list[int] = []
    emitter.ping.connect(received.append)
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for i in range(1000):
        emitter.setObjectName("x")  # a method that returns nothing
        emitter.ping.emit(i)
    assert len(received) == 1000
    # A few references may come and go elsewhere meanwhile; a lost one per call is 1000.
    assert abs(sys.getrefcount(None) - none_before) < 100
    assert abs(sys.getrefcount(True) - true_before) < 100

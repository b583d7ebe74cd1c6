"""Work around a reference-count bug of PySide6 6.12.0 on Python 3.11.

Its abi3 wheel returns `None` (from every void method, e.g. `QTextCursor.insertHtml`) and
`True` (from `SignalInstance.emit` / `.disconnect`) without taking a reference. Python 3.12
made these objects immortal, so there the bug is harmless; on 3.10 and 3.11 each call lowers
the count by one, and after some thousands of calls the interpreter aborts with
"Fatal Python error: none_dealloc: deallocating None" (or bool_dealloc).

The bug is probed at import. Only when it shows are None, True and False given a count so
large that no run can use it up, which is what Python 3.12 does for them anyway; those
singletons are never freed in either case, so nothing else changes.
"""

from __future__ import annotations

import ctypes
import sys

from PySide6.QtCore import QObject, Signal

# Far more references than any run can lose (about 10^12), far below the Py_ssize_t limit.
_MARGIN = 1 << 40
_installed = False


class _Probe(QObject):
    ping = Signal()


def _losses() -> tuple[int, int]:
    """References to None and True that 16 void calls and 16 emits lose."""
    probe = _Probe()
    probe.ping.connect(probe.deleteLater)  # never runs: no event loop in between
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(16):
        probe.setObjectName("probe")  # a void method
    none_lost = none_before - sys.getrefcount(None)
    for _ in range(16):
        probe.ping.emit()
    true_lost = true_before - sys.getrefcount(True)
    probe.ping.disconnect()
    return none_lost, true_lost


def _immortalize(obj: object) -> None:
    # ob_refcnt is the first field of every object in release builds of CPython.
    ctypes.c_ssize_t.from_address(id(obj)).value += _MARGIN


def install() -> bool:
    """Apply the workaround when this PySide6 needs it (once); True when it was applied now."""
    global _installed
    if _installed or sys.version_info >= (3, 12) or hasattr(sys, "gettotalrefcount"):
        return False  # 3.12+: immortal already; debug builds lay objects out differently
    _installed = True
    none_lost, true_lost = _losses()
    if none_lost <= 0 and true_lost <= 0:
        return False
    for singleton in (None, True, False):
        _immortalize(singleton)
    return True

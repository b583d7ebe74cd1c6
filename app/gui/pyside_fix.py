"""Work around a reference-count bug of PySide6 6.12.0 on Python 3.11.

`SignalInstance.emit` and `.disconnect` return `True` without taking a reference to it.
On Python < 3.12, where `True` is not immortal, every call lowers its count by one and
after a few thousand signals the interpreter aborts ("bool_dealloc: deallocating True").
The bug is probed at import; only when it shows is the missing reference added back, so a
fixed PySide6 runs untouched.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, SignalInstance

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


class _Probe(QObject):
    ping = Signal()


def _leak_per_call(call: Callable[[], Any]) -> dict[bool, int]:
    """How many references to True and False one call loses."""
    before = {True: sys.getrefcount(True), False: sys.getrefcount(False)}
    for _ in range(8):
        call()
    return {value: round((before[value] - sys.getrefcount(value)) / 8) for value in (True, False)}


def _patched(method: Callable[..., Any], lost: dict[bool, int]) -> Callable[..., Any]:
    def call(self: SignalInstance, *args: Any) -> Any:
        result = method(self, *args)
        if result is True or result is False:
            for _ in range(lost[result]):
                _incref(result)
        return result

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


def install() -> list[str]:
    """Patch the leaking SignalInstance methods (once); returns the names patched."""
    if sys.version_info >= (3, 12) or getattr(SignalInstance, "_tailor_patched", False):
        return []
    probe = _Probe()
    patched = []

    def reconnect_and_disconnect() -> None:
        probe.ping.connect(_noop)
        probe.ping.disconnect(_noop)

    probe.ping.connect(_noop)
    emit_lost = _leak_per_call(probe.ping.emit)
    probe.ping.disconnect(_noop)
    connect_lost = _leak_per_call(reconnect_and_disconnect)
    if any(emit_lost.values()):
        SignalInstance.emit = _patched(SignalInstance.emit, emit_lost)
        patched.append("emit")
    if any(connect_lost.values()):
        SignalInstance.disconnect = _patched(SignalInstance.disconnect, connect_lost)
        patched.append("disconnect")
    SignalInstance._tailor_patched = True
    return patched


def _noop() -> None:
    pass

"""Route llama.cpp's own log into Python logging, and read buffer sizes out of it.

llama.cpp prints to stderr by default; in Tailor its lines go to the `llama_cpp` logger
(and so to the engine's log file), never to the user's terminal.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from engine.gguf.llama_handle import install_log_callback
from engine.gguf.llama_mtmd import install_log_callback as install_mtmd_log_callback

# enum ggml_log_level of the vendored llama.cpp (llama-cpp-python's own comment is out of date)
_LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_CONT = 5  # GGML_LOG_LEVEL_CONT: the line continues the previous one

# e.g. "llama_kv_cache:        CPU KV buffer size =    22.50 MiB"
_BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|compute|output) buffer size\s*=\s*([\d.]+) MiB")
_KIND = {"model": "weights", "KV": "kv", "compute": "compute", "output": "compute"}
# libmtmd's projector (clip.cpp) names its backend first, then the size of its weights, without a backend:
# "clip_ctx: CLIP using CUDA0 backend" ... "load_hparams: model size:   181.05 MiB"
_CLIP_BACKEND_RE = re.compile(r"CLIP using (\S+) backend")
_CLIP_WEIGHTS_RE = re.compile(r"load_hparams: model size:\s*([\d.]+) MiB")


@dataclass(slots=True)
class BufferSizes:
    """Bytes llama.cpp reported allocating, by kind ("weights", "kv", "compute") and backend name."""

    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)

    def total(self, kind: str) -> int:
        return sum(self.by_kind.get(kind, {}).values())

    def add(self, kind: str, backend: str, nbytes: int) -> None:
        per_backend = self.by_kind.setdefault(kind, {})
        per_backend[backend] = per_backend.get(backend, 0) + nbytes

    def forget(self, *kinds: str) -> None:
        """Drop what was logged for `kinds` (a context freed and made again logs its buffers anew)."""
        for kind in kinds:
            self.by_kind.pop(kind, None)


class LlamaLogBridge:
    """Installs a llama.cpp log callback for the life of the engine process.

    Keeps the last error lines (to explain a failed load) and the buffer sizes of the
    current model, which the memory report uses.
    """

    # llama.cpp keeps one log callback for the whole process and calls it until another is set, so a
    # callback must outlive its bridge: a bridge freed while still installed (a test's) left llama.cpp
    # calling freed memory at the next model load. Every callback ever installed is kept, not only the
    # last: code that saved the pointer before a bridge was made puts it back afterwards (llama_log_get
    # then llama_log_set, as tests do around a block), and that older callback must still be there. One
    # bridge is made per engine process (a test process makes a few hundred: a few KiB).
    _installed: ClassVar[list[object]] = []

    def __init__(self, logger: logging.Logger | None = None):
        self._logger = logger or logging.getLogger("llama_cpp")
        self._last_level = logging.INFO
        self._partial = ""
        self.recent_errors: deque[str] = deque(maxlen=8)
        self.buffers = BufferSizes()
        self._clip_backend = "CPU"
        LlamaLogBridge._installed.append(install_log_callback(self._on_log))

    def hear_projector(self) -> None:
        """libmtmd's own log (a projector's load, its buffers, each encode) comes here too; it has a
        callback of its own, which goes to stderr until set."""
        LlamaLogBridge._installed.append(install_mtmd_log_callback(self._on_log))

    def reset_buffers(self) -> None:
        self.buffers = BufferSizes()
        self.recent_errors.clear()

    @contextlib.contextmanager
    def separate_buffers(self) -> Iterator[BufferSizes]:
        """The buffers logged inside the block, kept apart from the model's (a draft model's own)."""
        kept, self.buffers = self.buffers, BufferSizes()
        try:
            yield self.buffers
        finally:
            self.buffers = kept

    def _on_log(self, level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        try:
            py_level = self._last_level if level == _CONT else _LEVELS.get(level, logging.INFO)
            self._last_level = py_level
            self._partial += text.decode("utf-8", errors="replace")
            if not self._partial.endswith("\n"):
                return
            for line in self._partial.splitlines():
                self._record(py_level, line.rstrip())
            self._partial = ""
        except Exception:  # noqa: BLE001 - an exception must never cross back into C
            pass

    def _record(self, level: int, line: str) -> None:
        if not line:
            return
        self._logger.log(level, "%s", line)
        if level >= logging.ERROR:
            self.recent_errors.append(line)
        match = _BUFFER_RE.search(line)
        if match:
            backend, kind, mib = match.groups()
            self.buffers.add(_KIND[kind], backend, int(float(mib) * 1024 * 1024))
        elif match := _CLIP_BACKEND_RE.search(line):
            self._clip_backend = match.group(1)
        elif match := _CLIP_WEIGHTS_RE.search(line):
            self.buffers.add("weights", self._clip_backend, int(float(match.group(1)) * 1024 * 1024))

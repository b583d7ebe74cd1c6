"""The status file of a running engine: its latest memory report, for `tailor mem` to read.

One JSON file per engine process, `engine-<pid>.json` in the folder the LoadRequest names,
replaced atomically (write a temporary file, then rename) so a reader never sees half of
one, and removed when the engine exits. An engine killed outright leaves its file behind;
readers check the process id (and its start time, against a reused id) before trusting it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path

import psutil

from engine.protocol import LoadRequest, MemoryReport, ModelInfo

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def status_path(directory: Path, pid: int) -> Path:
    return directory / f"engine-{pid}.json"


class StatusFile:
    """Writes one engine process's status; failures (a full or read-only disk) are logged, never raised."""

    def __init__(self, directory: Path, pid: int | None = None):
        self.pid = pid or os.getpid()
        self.path = status_path(directory, self.pid)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            self._started = psutil.Process(self.pid).create_time()
        except psutil.Error:
            self._started = 0.0
        self._model: dict | None = None
        self._forecast: dict | None = None
        self._failed = False

    def set_model(self, request: LoadRequest | None, info: ModelInfo | None) -> None:
        """The model the next reports belong to; None after an unload."""
        if request is None or info is None:
            self._model = self._forecast = None
            return
        self._model = {
            "path": info.path,
            "name": info.name,
            "n_ctx": info.n_ctx,
            "kv_type": request.kv_type,
            "flash_attn": request.flash_attn,
            "n_gpu_layers": request.n_gpu_layers,
        }
        self._forecast = request.forecast

    def write(self, report: MemoryReport) -> None:
        data = {
            "format": FORMAT_VERSION,
            "pid": self.pid,
            "started": self._started,
            "updated": time.time(),
            "model": self._model,
            "memory": report.to_dict(),
            "forecast": self._forecast,
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(self._tmp, self.path)
            self._failed = False
        except OSError as exc:
            if not self._failed:  # once per failure streak, not twice a second
                log.warning("cannot write the engine status file %s: %s", self.path, exc)
            self._failed = True

    def remove(self) -> None:
        for path in (self._tmp, self.path):
            with contextlib.suppress(OSError):
                path.unlink()

"""One log file per process.

The window, `tailor chat`, `tailor serve` and each one's engine process may run at once. Python's
rotating handler is not safe across processes: two of them rotating one `engine.log` rename each
other's files away and records are lost or land in the wrong file (on Windows the rename fails
outright while another process holds the file open). So each process writes its own file, named
after the shared base name, the start time and its pid (`engine.log` -> `engine-20261201-080312-4242.log`),
rotates only that file, and prunes the oldest files of its kind when it starts.
"""

from __future__ import annotations

import faulthandler
import logging
import logging.handlers
import os
import time
from pathlib import Path

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
MAX_BYTES = 5 * 1024 * 1024
# Files of one kind (tailor-*, engine-*) kept in the log folder; one backup each when a file rotates.
KEEP_FILES = 20
# A file written this recently may belong to a live process: never pruned.
PRUNE_MIN_AGE_S = 3600.0


def process_log_path(base: Path, pid: int | None = None, started: float | None = None) -> Path:
    """This process's own file beside `base`: `<stem>-<YYYYmmdd-HHMMSS>-<pid><suffix>`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if started is None else started))
    return base.with_name(f"{base.stem}-{stamp}-{os.getpid() if pid is None else pid}{base.suffix}")


def process_logs(base: Path) -> list[Path]:
    """The per-process files of `base`'s kind, oldest first (rotated backups not included)."""
    if not base.parent.is_dir():
        return []
    files = [p for p in base.parent.glob(f"{base.stem}-*{base.suffix}") if p.is_file()]
    return sorted(files, key=lambda p: (p.stat().st_mtime, p.name))


def latest_process_log(base: Path) -> Path | None:
    """The most recently written file of `base`'s kind, or None when there is none."""
    files = process_logs(base)
    return files[-1] if files else None


def prune_process_logs(base: Path, keep: int = KEEP_FILES, now: float | None = None) -> list[Path]:
    """Delete the oldest files of `base`'s kind (and their backups) beyond `keep`; returns what went.

    A file written within the last hour is kept whatever the count: its process may still run.
    """
    now = time.time() if now is None else now
    removed = []
    files = process_logs(base)
    for path in files[: max(0, len(files) - keep)]:
        try:
            if now - path.stat().st_mtime < PRUNE_MIN_AGE_S:
                continue
            for victim in (path, path.with_name(path.name + ".1")):
                victim.unlink(missing_ok=True)
            removed.append(path)
        except OSError:
            continue  # in use (Windows) or already gone: try again at the next start
    return removed


class ProcessLogHandler(logging.handlers.RotatingFileHandler):
    """A rotating handler on a file only this process writes; with `crash_traces`, a native
    crash (SIGSEGV, SIGABRT, ...) also writes Python's traceback of every thread into it."""

    def __init__(self, path: Path, crash_traces: bool = False, max_bytes: int = MAX_BYTES):
        super().__init__(path, maxBytes=max_bytes, backupCount=1, encoding="utf-8")
        self.crash_traces = crash_traces
        self.setFormatter(logging.Formatter(LOG_FORMAT))
        self._follow_stream()

    def doRollover(self) -> None:
        super().doRollover()
        self._follow_stream()

    def close(self) -> None:
        if self.crash_traces and faulthandler.is_enabled():
            faulthandler.disable()
        super().close()

    def _follow_stream(self) -> None:
        # faulthandler writes through the file descriptor it was given: point it at the new file
        # after each rotation, so a crash trace lands where the latest records are.
        if self.crash_traces and self.stream is not None:
            faulthandler.enable(file=self.stream, all_threads=True)


def open_process_log(base: Path, crash_traces: bool = False) -> ProcessLogHandler:
    """Create this process's log file beside `base`, after pruning old ones of its kind."""
    base.parent.mkdir(parents=True, exist_ok=True)
    prune_process_logs(base)
    return ProcessLogHandler(process_log_path(base), crash_traces=crash_traces)

"""What a stdio MCP server writes on stderr: the last lines kept in memory (shown when it fails), and the
whole of it (up to a cap) in a log file when one is asked for."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import IO

TAIL_LINES = 20
TAIL_BYTES = 4096
LOG_CAP = 1 << 20  # bytes of one run's stderr written to its log file; a flood stops there


class StderrTail:
    """A pipe for a server's stderr and the thread that reads it.

    Args:
        log_file: where to copy what the server writes (at most LOG_CAP bytes; rewritten on each start),
            or None.

    `writer` is the file the server's process gets as its stderr; `close()` closes this side's copy once the
    process has it (or is gone): the reader stops when the server's copies close too.
    """

    def __init__(self, log_file: Path | None = None):
        read_fd, write_fd = os.pipe()
        self.writer: IO[str] = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb", buffering=0)
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._log = _open_log(log_file)
        self._thread = threading.Thread(target=self._read, name="mcp-stderr", daemon=True)
        self._thread.start()

    def tail(self) -> str:
        """The last TAIL_LINES lines (at most TAIL_BYTES) the server wrote, as text."""
        with self._lock:
            data = bytes(self._buffer)
        text = data.decode("utf-8", errors="replace")
        return "\n".join(text.rstrip("\n").split("\n")[-TAIL_LINES:]).strip("\n")[-TAIL_BYTES:]

    def wait(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) for the server's stderr to end: its last words are then in."""
        self._thread.join(timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.close()

    def _read(self) -> None:
        written = 0
        try:
            while chunk := self._reader.read(65536):
                with self._lock:
                    self._buffer += chunk
                    del self._buffer[: max(0, len(self._buffer) - 2 * TAIL_BYTES)]
                if self._log is not None and written < LOG_CAP:
                    self._log.write(chunk[: LOG_CAP - written])
                    self._log.flush()
                    written += len(chunk)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                self._reader.close()
            if self._log is not None:
                with contextlib.suppress(OSError):
                    self._log.close()


def _open_log(path: Path | None) -> IO[bytes] | None:
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "wb")  # noqa: SIM115 - closed by the reader thread
    except OSError:
        return None

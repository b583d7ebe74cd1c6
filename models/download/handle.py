"""One download's handle: its request, state, error and where its files are, and waiting on it.

A Downloader creates and drives it (models.download.downloader); the underscored fields are the flags and
the live connection that the Downloader and its SnapshotFetcher (models.download.fetch) share with
the worker thread.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path

from models.download.http_fetch import Connection
from models.download.request import DownloadError, DownloadFile, DownloadRequest, FileOutcome, State


class Download:
    """One download in a Downloader: its request, state, error and where its files are."""

    def __init__(self, download_id: int, request: DownloadRequest, headers: dict[str, str]) -> None:
        self.id = download_id
        self.request = request
        self.headers = headers
        self.state: State = "queued"
        self.error: DownloadError | None = None
        self.snapshot_dir: Path | None = None
        self.outcomes: dict[str, FileOutcome] = {}
        self.done_bytes = 0
        self.file_done = 0
        self.current_file: DownloadFile | None = None
        self._changed = threading.Condition()
        self._pause = False
        self._cancel = False
        self._wake = threading.Event()
        self._conn: Connection | None = None
        self._samples: deque[tuple[float, int]] = deque()
        self._last_progress = 0.0

    @property
    def total_bytes(self) -> int:
        return self.request.total_bytes

    def wait(self, timeout: float | None = None) -> State:
        """Block until the download is paused, done, failed or cancelled (or `timeout`); return its state."""
        with self._changed:
            self._changed.wait_for(lambda: self.state not in ("queued", "running"), timeout)
            return self.state

    def result(self, timeout: float | None = None) -> Path:
        """Wait for the end; the snapshot folder, or raise the DownloadError."""
        state = self.wait(timeout)
        if state == "done" and self.snapshot_dir is not None:
            return self.snapshot_dir
        raise self.error or DownloadError("network", f"download of {self.request.repo_id} is {state}")

    def _stop_requested(self) -> bool:
        return self._pause or self._cancel

    def _register(self, conn: Connection | None) -> None:
        self._conn = conn
        if conn is not None and self._stop_requested():
            conn.abort()

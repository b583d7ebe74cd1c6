"""Safe downloads into the Hugging Face cache: a queue of downloads on plain threads (no Qt).

    downloader = Downloader(on_event=print)          # events: Progress, StateChanged
    item = downloader.start(DownloadRequest(repo_id, commit, files, ref="main"), headers=auth)
    item.wait()                                      # or pause / resume / cancel from any thread
    item.snapshot_dir                                # {cache}/models--org--name/snapshots/{commit}

Each file goes to `blobs/{etag}.incomplete`, resumes from its size with `Range: bytes=N-` (a 206
with the right Content-Range, or a 200 that starts it over), is checked against the hub's sha256,
then renamed to `blobs/{etag}` and linked from `snapshots/{commit}/{path}`. Connection drops, 5xx
and 429 answers (waiting at least their Retry-After), stalls (no byte for `stall_timeout_s`) and
transfers below the floor rate are retried with exponential back-off. Names and ETags are checked,
and free space is checked, before any byte is fetched. While a blob is fetched its lock is held
(models.download.blob_lock): a second download of it, in this process or another, waits and reuses it.
Requests go through models.hub.http_client (proxies, the system's certificate store).

This module is the queue (threads, pause/resume/cancel, state and progress events); one download's
handle is models.download.handle, fetching its files models.download.fetch, the checks before and
after models.download.checks, the request and event types models.download.request.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx2

from models.download.blob_lock import BlobLock, blob_lock_path
from models.download.checks import remove_file
from models.download.fetch import SnapshotFetcher
from models.download.handle import Download
from models.download.http_fetch import RateFloor, Stopped, abort_connection
from models.download.records import clean_stale_partials, load_pending, remove_pending
from models.download.request import (
    TERMINAL_STATES,
    DownloadError,
    DownloadRequest,
    Progress,
    State,
    StateChanged,
)
from models.hub.cache import UnsafeName, hub_cache_dir, incomplete_path, repo_dir
from models.hub.http_client import http_client

log = logging.getLogger(__name__)
Event = Progress | StateChanged


class Downloader:
    """A queue of downloads into the hub cache, run on background threads.

    Args:
        cache_dir: The hub cache (default: `HF_HUB_CACHE` / `HF_HOME` / ~/.cache/huggingface/hub).
        on_event: Called (on a worker thread) with Progress, a few per second per download, and
            StateChanged on every change. The GUI wraps it in Qt signals.
        stall_timeout_s: No byte for this long counts as a stall and is retried; an answer's headers
            must come within it too.
        rate_floor: A transfer slower than this over its window is cut and retried (None: no floor).
        max_retries: Consecutive failed attempts of one file (without any byte gained, or cut for
            being too slow) before giving up.
        backoff_s, backoff_max_s: First retry delay, doubled after each failure up to the maximum;
            a Retry-After from the server is waited out (up to the maximum).
        lock_poll_s: How often a download waiting for another one's blob lock checks for pause/cancel.
        max_parallel: Downloads that run at once; the rest wait in order.
        progress_interval_s: Least time between two Progress events of one download.
    """

    def __init__(
        self,
        cache_dir: Path | str | None = None,
        *,
        on_event: Callable[[Event], None] | None = None,
        stall_timeout_s: float = 30.0,
        rate_floor: RateFloor | None = RateFloor(),  # noqa: B008 - frozen, so one shared default is safe
        max_retries: int = 8,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_parallel: int = 1,
        chunk_size: int = 1 << 20,
        progress_interval_s: float = 0.25,
        lock_poll_s: float = 0.2,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
        self.on_event = on_event
        self.progress_interval_s = progress_interval_s
        self._slots = threading.Semaphore(max_parallel)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._downloads: dict[int, Download] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._fetcher = SnapshotFetcher(
            self.cache_dir,
            # A fresh connection per request (no keep-alive), so each socket is seen and can be shut.
            http_client(httpx2.Timeout(stall_timeout_s), keep_alive=False),
            self._progress,
            stall_timeout_s=stall_timeout_s,
            rate_floor=rate_floor,
            max_retries=max_retries,
            backoff_s=backoff_s,
            backoff_max_s=backoff_max_s,
            chunk_size=chunk_size,
            lock_poll_s=lock_poll_s,
        )

    # -- the public API -------------------------------------------------------------------------

    def start(self, request: DownloadRequest, headers: dict[str, str] | None = None) -> Download:
        """Queue `request`; it runs as soon as a slot is free. Returns its handle at once."""
        item = Download(next(self._ids), request, dict(headers or {}))
        with self._lock:
            self._downloads[item.id] = item
        self._emit(StateChanged(item.id, "queued"))
        self._spawn(item)
        return item

    def download(self, request: DownloadRequest, headers: dict[str, str] | None = None) -> Path:
        """Download and wait: the snapshot folder, or raise DownloadError."""
        return self.start(request, headers).result()

    def pause(self, item: Download | int) -> None:
        """Stop fetching and keep the partial files; `resume` continues from them."""
        item = self._get(item)
        with item._changed:
            if item.state not in ("queued", "running"):
                return
            item._pause = True
        item._wake.set()
        abort_connection(item._conn)

    def resume(self, item: Download | int) -> None:
        """Continue a paused (or failed) download from its partial files."""
        item = self._get(item)
        with item._changed:
            if item.state not in ("paused", "failed"):
                return
            item._pause = False
            item._wake.clear()
            item.error = None
            self._set_state(item, "queued")
        self._spawn(item)

    def cancel(self, item: Download | int) -> None:
        """Stop and remove the partial files of the download's unfinished files."""
        item = self._get(item)
        with item._changed:
            if item.state in ("done", "cancelled"):
                return
            item._cancel = True
            idle = item.state in ("paused", "failed")
        item._wake.set()
        abort_connection(item._conn)
        if idle:
            self._finish_cancel(item)

    def downloads(self) -> list[Download]:
        with self._lock:
            return list(self._downloads.values())

    def pending_requests(self) -> list[DownloadRequest]:
        """Downloads recorded as started and not ended (e.g. before the app was closed)."""
        return load_pending(self.cache_dir)

    def clean_stale_partials(self, max_age_days: float = 7.0) -> list[Path]:
        return clean_stale_partials(self.cache_dir, max_age_days)

    def close(self, timeout: float = 10.0) -> None:
        """Pause every running download (partials kept for the next start) and wait for the threads."""
        for item in self.downloads():
            self.pause(item)
        deadline = time.monotonic() + timeout
        for thread in list(self._threads.values()):
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- the worker ------------------------------------------------------------------------------

    def _get(self, item: Download | int) -> Download:
        return item if isinstance(item, Download) else self._downloads[item]

    def _spawn(self, item: Download) -> None:
        thread = threading.Thread(target=self._run, args=(item,), name=f"download-{item.id}", daemon=True)
        self._threads[item.id] = thread
        thread.start()

    def _run(self, item: Download) -> None:
        with self._slots:
            if item._cancel:
                self._finish_cancel(item)
                return
            if item._pause:
                self._set_state(item, "paused")
                return
            self._set_state(item, "running")
            try:
                item.snapshot_dir = self._fetcher.fetch(item)
            except Stopped:
                if item._cancel:
                    self._finish_cancel(item)
                else:
                    self._set_state(item, "paused")
            except DownloadError as exc:
                if item._cancel:
                    self._finish_cancel(item)
                    return
                if exc.kind != "network":  # nothing to resume: the partial was removed or never made
                    remove_pending(self.cache_dir, item.request)
                self._set_state(item, "failed", exc)
            except Exception as exc:  # a bug must not leave the GUI waiting forever
                log.exception("download %s failed", item.id)
                self._set_state(item, "failed", DownloadError("network", f"unexpected error: {exc!r}"))
            else:
                remove_pending(self.cache_dir, item.request)
                self._set_state(item, "done")

    # -- events ----------------------------------------------------------------------------------

    def _set_state(self, item: Download, state: State, error: DownloadError | None = None) -> None:
        with item._changed:
            item.state = state
            if error is not None:
                item.error = error
            item._changed.notify_all()
        snapshot = str(item.snapshot_dir) if item.snapshot_dir and state == "done" else None
        self._emit(StateChanged(item.id, state, error, snapshot))

    def _finish_cancel(self, item: Download) -> None:
        with item._changed:
            if item.state in TERMINAL_STATES:
                return
        try:
            repo = repo_dir(self.cache_dir, item.request.repo_id)
            for file in item.request.files:
                try:
                    partial = incomplete_path(repo, file.blob_id)
                    lock = BlobLock(blob_lock_path(self.cache_dir, item.request.repo_id, file.blob_id))
                except UnsafeName:
                    continue
                if not partial.exists():
                    continue
                if not lock.try_acquire():  # another download (maybe another process) is writing it
                    continue
                try:
                    remove_file(partial)
                finally:
                    lock.release()
        except UnsafeName:
            pass
        remove_pending(self.cache_dir, item.request)
        self._set_state(item, "cancelled", DownloadError("cancelled", f"download of {item.request.repo_id} "
                                                                      "cancelled"))

    def _progress(self, item: Download, force: bool = False, note: str | None = None) -> None:
        now = time.monotonic()
        if not force and now - item._last_progress < self.progress_interval_s:
            return
        item._last_progress = now
        samples = item._samples
        samples.append((now, item.done_bytes))
        while len(samples) > 2 and now - samples[0][0] > 3.0:
            samples.popleft()
        elapsed = now - samples[0][0]
        speed = (item.done_bytes - samples[0][1]) / elapsed if elapsed > 0 else 0.0
        left = item.total_bytes - item.done_bytes
        eta = left / speed if speed > 0 else (0.0 if left <= 0 else None)
        file = item.current_file
        self._emit(Progress(item.id, file.path_in_repo if file else None, item.file_done,
                            file.size if file else 0, item.done_bytes, item.total_bytes, speed, eta, note))

    def _emit(self, event: Event) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a broken listener must not break the download
            log.exception("download event listener failed")


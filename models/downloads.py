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
(models.blob_lock): a second download of it, in this process or another, waits and reuses it.
Requests go through models.http_client (proxies, the system's certificate store).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import httpx2

from models.blob_lock import BlobLock, blob_lock_path
from models.download_http import (
    Connection,
    HashState,
    RateFloor,
    Retryable,
    Stopped,
    abort_connection,
    fetch_into,
)
from models.download_records import add_pending, clean_stale_partials, load_pending, remove_pending
from models.download_types import (
    TERMINAL_STATES,
    DownloadError,
    DownloadFile,
    DownloadRequest,
    FileOutcome,
    Progress,
    State,
    StateChanged,
)
from models.hf_cache import (
    UnsafeName,
    blob_path,
    hub_cache_dir,
    incomplete_path,
    link_blob,
    normalize_etag,
    repo_dir,
    safe_join,
    snapshot_dir,
    validate_commit,
    write_ref,
)
from models.http_client import http_client
from models.units import human_size

__all__ = [
    "Download",
    "DownloadError",
    "DownloadFile",
    "DownloadRequest",
    "Downloader",
    "Progress",
    "RateFloor",
    "StateChanged",
    "clean_stale_partials",
    "load_pending",
]

log = logging.getLogger(__name__)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
FREE_SPACE_MARGIN = 0.05
Event = Progress | StateChanged


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
        self.stall_timeout_s = stall_timeout_s
        self.rate_floor = rate_floor
        self.lock_poll_s = lock_poll_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.chunk_size = chunk_size
        self.progress_interval_s = progress_interval_s
        self._slots = threading.Semaphore(max_parallel)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._downloads: dict[int, Download] = {}
        self._threads: dict[int, threading.Thread] = {}
        # A fresh connection per request (no keep-alive), so each socket is seen and can be shut.
        self._client = http_client(httpx2.Timeout(stall_timeout_s), keep_alive=False)

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
                item.snapshot_dir = self._execute(item)
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

    def _execute(self, item: Download) -> Path:
        request = item.request
        plan = self._validate(request)
        repo = repo_dir(self.cache_dir, request.repo_id)
        self._check_free_space(repo, plan)
        add_pending(self.cache_dir, request)
        snapshot = snapshot_dir(repo, request.revision)
        finished = [f.size for f, b, _, _ in plan if b.exists() and b.stat().st_size == f.size]
        item.done_bytes = sum(finished) + sum(min(_size_of(p), f.size) for f, b, p, _ in plan if not b.exists())
        completed = 0
        for file, blob, partial, destination in plan:
            outcome = item.outcomes.setdefault(file.path_in_repo, FileOutcome(file.path_in_repo))
            if not _complete(blob, file):
                self._fetch_locked(item, file, blob, partial, outcome, completed)
            completed += file.size
            item.done_bytes = completed
            link_blob(blob, destination)
            outcome.local_path = str(destination)
            self._progress(item, force=True)
        if request.ref:
            write_ref(repo, request.ref, request.revision)
        item.current_file = None
        return snapshot

    def _validate(self, request: DownloadRequest) -> list[tuple[DownloadFile, Path, Path, Path]]:
        """Refuse bad names, ETags and sizes before any byte is fetched; the paths of each file."""
        try:
            repo = repo_dir(self.cache_dir, request.repo_id)
            snapshot = snapshot_dir(repo, request.revision)
            validate_commit(request.revision)
            if request.ref:
                safe_join(repo / "refs", request.ref)
            plan = []
            seen: set[str] = set()
            for file in request.files:
                destination = safe_join(snapshot, file.path_in_repo)
                if file.path_in_repo in seen:
                    raise UnsafeName(f"refused file name {file.path_in_repo!r}: listed twice")
                seen.add(file.path_in_repo)
                if file.etag is None and file.sha256 is None:
                    raise UnsafeName(f"refused {file.path_in_repo!r}: no ETag or sha256 to name its blob")
                blob_id = normalize_etag(file.blob_id)
                if file.sha256 is not None and not _SHA256.match(file.sha256.lower()):
                    raise UnsafeName(f"refused {file.path_in_repo!r}: invalid sha256 {file.sha256!r}")
                if file.size < 0:
                    raise UnsafeName(f"refused {file.path_in_repo!r}: negative size")
                plan.append((file, blob_path(repo, blob_id), incomplete_path(repo, blob_id), destination))
        except UnsafeName as exc:
            raise DownloadError("refused", str(exc)) from exc
        return plan

    def _check_free_space(self, repo: Path, plan: list[tuple[DownloadFile, Path, Path, Path]]) -> None:
        remaining = sum(f.size - min(_size_of(p), f.size) for f, b, p, _ in plan if not b.exists())
        if not remaining:
            return
        need = int(remaining * (1 + FREE_SPACE_MARGIN))
        place = repo
        while not place.exists() and place != place.parent:
            place = place.parent
        free = shutil.disk_usage(place).free
        if free < need:
            raise DownloadError(
                "disk_full",
                f"not enough free space in {self.cache_dir}: the download needs {human_size(need)} "
                f"(with a 5% margin), {human_size(free)} is free",
            )

    def _fetch_locked(self, item: Download, file: DownloadFile, blob: Path, partial: Path,
                      outcome: FileOutcome, completed: int) -> None:
        """Fetch, verify and store one blob while holding its lock; reuse it if another download
        stored it while this one waited."""
        lock = BlobLock(blob_lock_path(self.cache_dir, item.request.repo_id, file.blob_id))

        def waiting() -> None:
            item.current_file = file
            outcome.waited_for_lock = True
            self._progress(item, force=True, note="waiting for another download of this file")

        if not lock.acquire(item._stop_requested, self.lock_poll_s, waiting):
            raise Stopped
        try:
            if _complete(blob, file):
                outcome.reused = True
                return
            state = self._fetch_file(item, file, partial, outcome, completed)
            self._verify(file, partial, state)
            os.replace(partial, blob)
        finally:
            lock.release()

    def _fetch_file(
        self, item: Download, file: DownloadFile, partial: Path, outcome: FileOutcome, completed: int
    ) -> HashState:
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.touch()  # the partial exists from the first request on, as the lock does
        item.current_file = file
        state = HashState()
        failures = 0

        def on_bytes(n: int) -> None:
            item.file_done = state.length
            item.done_bytes = completed + state.length
            self._progress(item)

        while True:
            if item._stop_requested():
                raise Stopped
            fetched_before = state.fetched
            outcome.attempts += 1
            conn = Connection()
            item._register(conn)
            try:
                fetch_into(self._client, file, partial, item.headers, state=state, timeout=self.stall_timeout_s,
                           chunk_size=self.chunk_size, floor=self.rate_floor, on_bytes=on_bytes,
                           should_stop=item._stop_requested, conn=conn)
                break
            except Retryable as exc:
                last = exc
            except DownloadError as exc:
                if exc.kind == "disk_full":
                    _remove(partial)
                raise
            finally:
                item._register(None)
                outcome.fetched_bytes = state.fetched
                outcome.restarted = state.restarted
            # A drip gains bytes on every attempt: cut for being too slow, it still counts as failed.
            failures = 0 if state.fetched > fetched_before and not last.slow else failures + 1
            if failures > self.max_retries:
                raise DownloadError("network", f"giving up on {file.path_in_repo} after {outcome.attempts} "
                                               f"attempts: {last}")
            delay = min(self.backoff_max_s, self.backoff_s * 2 ** max(0, failures - 1))
            delay *= random.uniform(0.8, 1.2)
            if last.retry_after is not None:  # the server said how long it is busy
                delay = max(delay, min(last.retry_after, self.backoff_max_s))
            outcome.delays.append(delay)
            log.info("retrying %s in %.1f s: %s", file.path_in_repo, delay, last)
            if item._wake.wait(delay) and item._stop_requested():
                raise Stopped
        item.file_done = state.length
        return state

    def _verify(self, file: DownloadFile, partial: Path, state: HashState) -> None:
        size = _size_of(partial)
        if size != file.size:
            _remove(partial)
            raise DownloadError("checksum", f"size mismatch for {file.path_in_repo}: got {size} bytes, "
                                            f"expected {file.size}; the file was removed")
        if file.sha256 is None:
            return
        digest = state.sha256.hexdigest() if state.length == size else _sha256_of(partial)
        if digest != file.sha256.lower():
            _remove(partial)
            raise DownloadError("checksum", f"checksum mismatch for {file.path_in_repo}: expected sha256 "
                                            f"{file.sha256.lower()}, got {digest}; the file was removed")

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
                    _remove(partial)
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


def _complete(blob: Path, file: DownloadFile) -> bool:
    try:
        return blob.stat().st_size == file.size
    except OSError:
        return False


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _sha256_of(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()



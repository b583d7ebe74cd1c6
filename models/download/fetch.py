"""Fetching one download's files into the hub cache, on the Downloader's worker thread.

For each file: take its blob lock (models.download.blob_lock) or reuse the blob another download stored
meanwhile, fetch it into `blobs/{etag}.incomplete` with retries and exponential back-off
(models.download.http_fetch does one attempt), verify it (models.download.checks), rename it to its
blob and link it from the snapshot.
"""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx2

from models.download.blob_lock import BlobLock, blob_lock_path
from models.download.checks import check_free_space, is_complete, plan_files, remove_file, size_of, verify
from models.download.handle import Download
from models.download.http_fetch import Connection, HashState, RateFloor, Retryable, Stopped, fetch_into
from models.download.records import add_pending
from models.download.request import DownloadError, DownloadFile, FileOutcome
from models.hub.cache import link_blob, repo_dir, snapshot_dir, write_ref

log = logging.getLogger(__name__)


class ProgressSink(Protocol):
    """The Downloader's progress report: at most a few per second, unless `force`."""

    def __call__(self, item: Download, force: bool = False, note: str | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class SnapshotFetcher:
    """Fetches a download's files into its snapshot; the Downloader's settings are documented there."""

    cache_dir: Path
    client: httpx2.Client
    progress: ProgressSink
    stall_timeout_s: float
    rate_floor: RateFloor | None
    max_retries: int
    backoff_s: float
    backoff_max_s: float
    chunk_size: int
    lock_poll_s: float

    def fetch(self, item: Download) -> Path:
        """Check, fetch and link every file of `item`; its snapshot folder. Raises Stopped or DownloadError."""
        request = item.request
        plan = plan_files(self.cache_dir, request)
        repo = repo_dir(self.cache_dir, request.repo_id)
        check_free_space(self.cache_dir, repo, plan)
        add_pending(self.cache_dir, request)
        snapshot = snapshot_dir(repo, request.revision)
        finished = [f.size for f, b, _, _ in plan if b.exists() and b.stat().st_size == f.size]
        item.done_bytes = sum(finished) + sum(min(size_of(p), f.size) for f, b, p, _ in plan if not b.exists())
        completed = 0
        for file, blob, partial, destination in plan:
            outcome = item.outcomes.setdefault(file.path_in_repo, FileOutcome(file.path_in_repo))
            if not is_complete(blob, file):
                self._fetch_locked(item, file, blob, partial, outcome, completed)
            completed += file.size
            item.done_bytes = completed
            link_blob(blob, destination)
            outcome.local_path = str(destination)
            self.progress(item, force=True)
        if request.ref:
            write_ref(repo, request.ref, request.revision)
        item.current_file = None
        return snapshot

    def _fetch_locked(self, item: Download, file: DownloadFile, blob: Path, partial: Path,
                      outcome: FileOutcome, completed: int) -> None:
        """Fetch, verify and store one blob while holding its lock; reuse it if another download
        stored it while this one waited."""
        lock = BlobLock(blob_lock_path(self.cache_dir, item.request.repo_id, file.blob_id))

        def waiting() -> None:
            item.current_file = file
            outcome.waited_for_lock = True
            self.progress(item, force=True, note="waiting for another download of this file")

        if not lock.acquire(item._stop_requested, self.lock_poll_s, waiting):
            raise Stopped
        try:
            if is_complete(blob, file):
                outcome.reused = True
                return
            state = self._fetch_file(item, file, partial, outcome, completed)
            verify(file, partial, state)
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
            self.progress(item)

        while True:
            if item._stop_requested():
                raise Stopped
            fetched_before = state.fetched
            outcome.attempts += 1
            conn = Connection()
            item._register(conn)
            try:
                fetch_into(self.client, file, partial, item.headers, state=state, timeout=self.stall_timeout_s,
                           chunk_size=self.chunk_size, floor=self.rate_floor, on_bytes=on_bytes,
                           should_stop=item._stop_requested, conn=conn)
                break
            except Retryable as exc:
                last = exc
            except DownloadError as exc:
                if exc.kind == "disk_full":
                    remove_file(partial)
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

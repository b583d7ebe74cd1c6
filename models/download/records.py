"""Pending downloads kept on disk (`{hub cache}/.locks/.tailor/pending-downloads.json`) and start-up cleaning.

A record is written when a download starts and removed when it ends (done, cancelled, or failed
for good), so after a crash or a quit the app knows what to resume and which `.incomplete` files
are its own.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from models.download.blob_lock import BlobLock, partial_lock_path
from models.download.request import DownloadRequest
from models.hub.cache import TAILOR_DIR, UnsafeName, incomplete_path, repo_dir

log = logging.getLogger(__name__)

RECORDS_FILE = "pending-downloads.json"
# An .incomplete file without a record is left alone while this fresh: another tool may be writing it.
FOREIGN_GRACE_S = 24 * 3600.0
_lock = threading.Lock()


def records_path(cache_dir: Path) -> Path:
    return Path(cache_dir).joinpath(*TAILOR_DIR.split("/"), RECORDS_FILE)


def load_pending(cache_dir: Path) -> list[DownloadRequest]:
    """The downloads that started and did not end, oldest first (unreadable records are skipped)."""
    with _lock:
        return [DownloadRequest.from_dict(r["request"]) for r in _read(cache_dir) if _valid(r)]


def add_pending(cache_dir: Path, request: DownloadRequest) -> None:
    with _writing(cache_dir):
        records = [r for r in _read(cache_dir) if _valid(r) and r["key"] != request.key]
        records.append({"key": request.key, "started": time.time(), "request": request.to_dict()})
        _write(cache_dir, records)


def remove_pending(cache_dir: Path, request: DownloadRequest) -> None:
    if not records_path(cache_dir).exists():  # nothing recorded (and no folder made for nothing)
        return
    with _writing(cache_dir):
        records = _read(cache_dir)
        kept = [r for r in records if _valid(r) and r["key"] != request.key]
        if len(kept) != len(records):
            _write(cache_dir, kept)


def pending_partials(cache_dir: Path) -> set[Path]:
    """The .incomplete paths that belong to recorded downloads."""
    paths: set[Path] = set()
    for request in load_pending(cache_dir):
        for file in request.files:
            try:
                paths.add(incomplete_path(repo_dir(cache_dir, request.repo_id), file.blob_id))
            except UnsafeName:
                continue
    return paths


def clean_stale_partials(cache_dir: Path, max_age_days: float = 7.0, *, now: float | None = None) -> list[Path]:
    """Remove `.incomplete` blobs older than `max_age_days`, and those no pending download owns.

    An unowned file is removed only once it is older than a day (another tool may be writing it),
    and no file whose blob lock is held (a download is writing it, whatever its age); records
    whose partial files are all gone and that are too old are dropped too. Returns the
    removed paths.
    """
    cache_dir = Path(cache_dir)
    now = time.time() if now is None else now
    owned = pending_partials(cache_dir)
    removed: list[Path] = []
    for partial in cache_dir.glob("models--*/blobs/*.incomplete"):
        try:
            age = now - partial.stat().st_mtime
        except OSError:
            continue
        stale = age > max_age_days * 86400 or (partial not in owned and age > FOREIGN_GRACE_S)
        if not stale:
            continue
        lock = BlobLock(partial_lock_path(partial))
        if not lock.try_acquire():  # a download (ours or huggingface_hub's) is writing it now
            continue
        try:
            partial.unlink()
            removed.append(partial)
        except OSError as exc:
            log.warning("cannot remove stale partial %s: %s", partial, exc)
        finally:
            lock.release()
    if not records_path(cache_dir).exists():
        return removed
    with _writing(cache_dir):
        records = _read(cache_dir)
        kept = [r for r in records if _valid(r) and now - float(r.get("started", now)) <= max_age_days * 86400]
        if len(kept) != len(records):
            _write(cache_dir, kept)
    return removed


@contextmanager
def _writing(cache_dir: Path) -> Iterator[None]:
    """Hold the records for a read-modify-write: against this process's threads and other processes
    (the window and `tailor pull` share the file). Reads need neither: writes replace it whole."""
    with _lock:
        path = records_path(cache_dir)
        file_lock: FileLock | None = FileLock(str(path) + ".lock", timeout=10)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            file_lock.acquire()
        except (OSError, Timeout) as exc:  # a read-only or full disk: the records are best-effort
            log.warning("writing download records without their lock: %s", exc)
            file_lock = None
        try:
            yield
        finally:
            if file_lock is not None:
                file_lock.release()


def _valid(record: object) -> bool:
    if not isinstance(record, dict) or "key" not in record or "request" not in record:
        return False
    try:
        DownloadRequest.from_dict(record["request"])
    except (KeyError, TypeError, ValueError):
        return False
    return True


def _read(cache_dir: Path) -> list[dict]:
    try:
        data = json.loads(records_path(cache_dir).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable download records: %s", exc)
        return []
    return data if isinstance(data, list) else []


def _write(cache_dir: Path, records: list[dict]) -> None:
    path = records_path(cache_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(records, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # a full disk must not turn into a second error
        log.warning("cannot write download records: %s", exc)

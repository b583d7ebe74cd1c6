"""One download of a blob at a time, across threads and processes (the window and `tailor pull`).

The lock is huggingface_hub's own, `{hub cache}/.locks/models--org--name/{etag}.lock`, taken with
the same filelock package (flock where the file system has it), so a `hf_hub_download` of the same
file and ours also wait for each other. Whoever waited then finds the blob complete and reuses it,
or resumes the partial file the other left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock, Timeout

from models.hub.cache import normalize_etag, repo_folder_name

log = logging.getLogger(__name__)
LOCKS_DIR = ".locks"


def blob_lock_path(cache_dir: Path, repo_id: str, blob_id: str) -> Path:
    """Where huggingface_hub locks the blob `blob_id` of `repo_id` (UnsafeName for a bad id)."""
    return Path(cache_dir) / LOCKS_DIR / repo_folder_name(repo_id) / f"{normalize_etag(blob_id)}.lock"


def partial_lock_path(partial: Path) -> Path:
    """The lock of the blob a `{repo}/blobs/{etag}.incomplete` file is the partial of."""
    repo = partial.parent.parent
    return repo.parent / LOCKS_DIR / repo.name / (partial.name.removesuffix(".incomplete") + ".lock")


class BlobLock:
    """The lock of one blob, acquired and released on one thread (the download's worker)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # 0o664 as huggingface_hub: users sharing a cache can wait on each other's locks.
        self._lock = FileLock(str(path), mode=0o664)

    def acquire(self, should_stop: Callable[[], bool], poll_s: float = 0.2,
                on_wait: Callable[[], None] | None = None) -> bool:
        """Wait for the lock; False if `should_stop` turned true first. `on_wait` is called once, when
        the lock is found held."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        waited = False
        while True:
            try:
                self._lock.acquire(timeout=0 if not waited else poll_s)
                return True
            except Timeout:
                if not waited:
                    waited = True
                    log.info("waiting for %s: another download of this file is running", self.path)
                    if on_wait is not None:
                        on_wait()
                if should_stop():
                    return False

    def try_acquire(self) -> bool:
        """Take the lock only if it is free now."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire(timeout=0)
        except (Timeout, OSError):
            return False
        return True

    def release(self) -> None:
        try:
            self._lock.release()
        except OSError as exc:  # the lock file vanished: nothing is held any more
            log.warning("cannot release %s: %s", self.path, exc)

"""The checks around a download: names, ETags, sizes and free space before any byte is fetched,
size and sha256 after; and the small file helpers they share with the fetcher."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from models.download.http_fetch import HashState
from models.download.request import DownloadError, DownloadFile, DownloadRequest
from models.hub.cache import (
    UnsafeName,
    blob_path,
    incomplete_path,
    normalize_etag,
    repo_dir,
    safe_join,
    snapshot_dir,
    validate_commit,
)
from models.units import human_size

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
FREE_SPACE_MARGIN = 0.05
# One file of a download and where it goes: (file, blob, blob's .incomplete partial, snapshot link).
PlannedFile = tuple[DownloadFile, Path, Path, Path]


def plan_files(cache_dir: Path, request: DownloadRequest) -> list[PlannedFile]:
    """Refuse bad names, ETags and sizes before any byte is fetched; the paths of each file."""
    try:
        repo = repo_dir(cache_dir, request.repo_id)
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


def check_free_space(cache_dir: Path, repo: Path, plan: list[PlannedFile]) -> None:
    """Raise a disk_full DownloadError unless the bytes still to fetch (plus a margin) fit."""
    remaining = sum(f.size - min(size_of(p), f.size) for f, b, p, _ in plan if not b.exists())
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
            f"not enough free space in {cache_dir}: the download needs {human_size(need)} "
            f"(with a 5% margin), {human_size(free)} is free",
        )


def verify(file: DownloadFile, partial: Path, state: HashState) -> None:
    """Check a fetched partial's size and sha256; a wrong one is removed and raises a checksum error."""
    size = size_of(partial)
    if size != file.size:
        remove_file(partial)
        raise DownloadError("checksum", f"size mismatch for {file.path_in_repo}: got {size} bytes, "
                                        f"expected {file.size}; the file was removed")
    if file.sha256 is None:
        return
    digest = state.sha256.hexdigest() if state.length == size else _sha256_of(partial)
    if digest != file.sha256.lower():
        remove_file(partial)
        raise DownloadError("checksum", f"checksum mismatch for {file.path_in_repo}: expected sha256 "
                                        f"{file.sha256.lower()}, got {digest}; the file was removed")


def is_complete(blob: Path, file: DownloadFile) -> bool:
    try:
        return blob.stat().st_size == file.size
    except OSError:
        return False


def size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def remove_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()

"""The standard Hugging Face cache layout, so huggingface_hub and other tools see our files and we see theirs.

    {HF_HUB_CACHE}/models--{org}--{name}/
        blobs/{etag}                      the file's bytes (etag: git sha1, or the sha256 of an LFS file)
        blobs/{etag}.incomplete           a download in progress
        snapshots/{commit}/{path}         a relative symlink to ../../blobs/{etag} (a copy where links fail)
        refs/{ref}                        the commit a branch or tag pointed to

No Qt, no network: paths and the few file operations that make the layout.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PurePosixPath

_HEX40_OR_64 = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DRIVE = re.compile(r"^[A-Za-z]:")

# Folder (inside the hub cache) where Tailor keeps its own small records: under `.locks`, which
# huggingface_hub's cache scan skips (a folder of its own would be reported as a corrupted repo).
TAILOR_DIR = ".locks/.tailor"


class UnsafeName(ValueError):
    """A repo id, file name, ref or ETag from the hub that could escape the cache or is malformed."""


def hub_cache_dir() -> Path:
    """The hub cache folder, read from the environment now (as huggingface_hub does at import time).

    `HF_HUB_CACHE` (or the older `HUGGINGFACE_HUB_CACHE`), else `$HF_HOME/hub`, else
    `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
    """
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def validate_repo_id(repo_id: str) -> str:
    """Return `repo_id` ("org/name" or "name") or raise UnsafeName."""
    parts = repo_id.split("/")
    if not 1 <= len(parts) <= 2 or not all(_REPO_PART.match(p) and ".." not in p for p in parts):
        raise UnsafeName(f"invalid repo id {repo_id!r}")
    return repo_id


def repo_folder_name(repo_id: str) -> str:
    """`org/name` -> `models--org--name` (the name huggingface_hub uses)."""
    return "models--" + "--".join(validate_repo_id(repo_id).split("/"))


def repo_dir(cache_dir: Path, repo_id: str) -> Path:
    return Path(cache_dir) / repo_folder_name(repo_id)


def validate_commit(commit: str) -> str:
    if not _COMMIT.match(commit or ""):
        raise UnsafeName(f"invalid commit hash {commit!r} (expected 40 hex characters)")
    return commit


def normalize_etag(etag: str) -> str:
    """The ETag without `W/` and quotes, lower-cased; raise UnsafeName unless 40 or 64 hex characters."""
    value = (etag or "").strip()
    if value.startswith("W/"):
        value = value[2:]
    value = value.strip('"').lower()
    if not _HEX40_OR_64.match(value):
        raise UnsafeName(f"invalid ETag {etag!r} (expected 40 or 64 hex characters)")
    return value


def safe_relative_path(name: str) -> PurePosixPath:
    """A file name from the hub as a relative POSIX path, or UnsafeName.

    Refused: empty names, absolute paths, `..` or `.` parts, backslashes, drive letters, UNC forms,
    NUL and other control characters.
    """
    if not name or not name.strip():
        raise UnsafeName(f"refused file name {name!r}: empty")
    if "\\" in name:
        raise UnsafeName(f"refused file name {name!r}: contains a backslash")
    if any(ord(c) < 32 for c in name):
        raise UnsafeName(f"refused file name {name!r}: contains a control character")
    if name.startswith("/"):
        raise UnsafeName(f"refused file name {name!r}: absolute or UNC path")
    if _DRIVE.match(name):
        raise UnsafeName(f"refused file name {name!r}: drive letter")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafeName(f"refused file name {name!r}: empty, '.' or '..' part")
    return PurePosixPath(*parts)


def safe_join(base: Path, name: str) -> Path:
    """`base / name` after `safe_relative_path`, its folder checked to stay inside `base` once resolved.

    The last part itself may already be a link (a snapshot's file points into blobs/ by design, and
    is replaced, never written through); a folder on the way that links elsewhere is refused.
    """
    relative = safe_relative_path(name)
    target = Path(base).joinpath(*relative.parts)
    root = Path(base).resolve()
    folder = target.parent.resolve()
    if folder != root and root not in folder.parents:
        raise UnsafeName(f"refused file name {name!r}: resolves outside the snapshot folder")
    return target


def blob_path(repo: Path, blob_id: str) -> Path:
    return repo / "blobs" / normalize_etag(blob_id)


def incomplete_path(repo: Path, blob_id: str) -> Path:
    return repo / "blobs" / f"{normalize_etag(blob_id)}.incomplete"


def snapshot_dir(repo: Path, commit: str) -> Path:
    return repo / "snapshots" / validate_commit(commit)


def write_ref(repo: Path, ref: str, commit: str) -> None:
    """Record that branch/tag `ref` points at `commit` (refs/{ref}, atomically)."""
    path = safe_join(repo / "refs", ref)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(validate_commit(commit))
    os.replace(tmp, path)


def link_blob(blob: Path, destination: Path) -> None:
    """Point `destination` at `blob` with a relative symlink; copy the blob where symlinks fail."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.is_symlink() or destination.exists():
        destination.unlink()
    relative = os.path.relpath(blob, destination.parent)
    try:
        os.symlink(relative, destination)
    except (OSError, NotImplementedError):
        tmp = destination.with_name(destination.name + ".tmp-copy")
        shutil.copyfile(blob, tmp)
        os.replace(tmp, destination)

"""Writing a file where the user said: whole or not at all, only as a regular file, and over an existing one
only when the user agreed.

A path the user names may be anything: a FIFO (a write would block), a device (`-o /dev/full` once
replaced the device node with an HTML file), a socket, a symbolic link (writing through it changes a
file elsewhere; renaming over it replaces the link). So the path is looked at with `lstat` (links not
followed) and only an absent path or a regular file is written; the bytes go to a temporary file beside
it, which then takes the path's place: by a hard link, which fails if something appeared there
meanwhile (no overwrite), or by a rename after the path is checked once more (overwrite).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from models.formats.local_file import kind_of


class TargetRefused(Exception):
    """The path cannot be written as asked; one line for the user."""


class TargetExists(TargetRefused):
    """A regular file is at the path and the user did not agree to replace it.

    Attributes:
        paths: the files that would be replaced.
    """

    def __init__(self, paths: list[Path], message: str):
        super().__init__(message)
        self.paths = paths


def what_is_at(path: Path) -> str | None:
    """None when nothing is at `path`; "file" for a regular file; else what it is, in words ("a folder",
    "a FIFO (named pipe)", "a symbolic link"...). Links are not followed."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TargetRefused(f"Cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return kind_of(mode)


def check_target(path: Path, *, overwrite: bool) -> None:
    """Refuse a path that is not absent or a regular file, or that is a file while `overwrite` is False.

    Raises:
        TargetExists: a regular file is there and `overwrite` is False.
        TargetRefused: anything else but nothing is there, or its folder is missing.
    """
    found = what_is_at(path)
    if found is None:
        parent = path.parent
        if not parent.is_dir():
            raise TargetRefused(f"Cannot write {path}: its folder {parent} does not exist")
        return
    if found != "file":
        raise TargetRefused(f"Cannot write {path}: it is {found}; Tailor writes only regular files")
    if not overwrite:
        raise TargetExists([path], f"{path} exists; use --force to replace it")


def write_whole(path: Path, chunks: Iterable[str], *, overwrite: bool) -> None:
    """Write `chunks` (text, UTF-8, "\\n" line ends) to `path` whole or not at all, as `check_target` allows.

    Raises:
        TargetRefused, TargetExists: as `check_target`, checked before and again at the end.
    """
    def fill(fd: int) -> None:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for chunk in chunks:
                f.write(chunk)

    _write(path, fill, overwrite)


def write_bytes_whole(path: Path, data: bytes, *, overwrite: bool) -> None:
    """Write `data` to `path` whole or not at all, as `write_whole` writes text (an exported image)."""
    def fill(fd: int) -> None:
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    _write(path, fill, overwrite)


def _write(path: Path, fill: Callable[[int], None], overwrite: bool) -> None:
    """`fill` writes (and closes) the descriptor of a temporary file beside `path`, which then takes its place."""
    check_target(path, overwrite=overwrite)
    try:
        fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        raise TargetRefused(f"Cannot write {path}: {exc.strerror or exc}") from None
    temp = Path(temp_name)
    try:
        fill(fd)
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp's file is private; an export is as any file the user writes
        _put_in_place(temp, path, overwrite)
    except OSError as exc:
        raise TargetRefused(f"Cannot write {path}: {exc.strerror or exc}") from None
    finally:
        temp.unlink(missing_ok=True)


def _put_in_place(temp: Path, path: Path, overwrite: bool) -> None:
    if overwrite:
        check_target(path, overwrite=True)  # still absent or a regular file: nothing else is renamed over
        os.replace(temp, path)
        return
    try:
        os.link(temp, path)  # atomic: fails if anything is at `path` now
    except FileExistsError:
        raise TargetExists([path], f"{path} exists; use --force to replace it") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        # A file system without hard links (FAT, some network shares): checked, then renamed.
        check_target(path, overwrite=False)
        os.replace(temp, path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_folder(folder: Path) -> None:
    """Refuse a folder target that is not a folder (links to folders are followed: the user chose it)."""
    with contextlib.suppress(OSError):
        if folder.is_dir():
            return
    found = what_is_at(folder)
    raise TargetRefused(f"Cannot write into {folder}: " + ("it does not exist" if found is None else f"it is {found}"))

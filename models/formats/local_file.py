"""Open a model file from disk, refusing anything that is not a regular file, without ever blocking.

A FIFO's `open()` waits for a writer and its reads wait for data, a character device may never end
(/dev/zero) and a socket cannot be opened at all: given as a model, each hung `tailor chat` and
`tailor plan`. Every reader of a local model file (GGUF headers, config and tokenizer JSON, the
engine's checks, the library's import) goes through `open_regular_file` or `check_regular_file`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from models.formats.errors import InvalidModelFile

# O_NONBLOCK makes the open of a FIFO return at once (POSIX); Windows has no FIFOs to open by path.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO (named pipe)", "a folder"...)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def _refusal(path: Path, mode: int) -> InvalidModelFile:
    if stat.S_ISDIR(mode):
        config = path / "config.json"
        try:
            config_mode = config.stat().st_mode
        except OSError:
            return InvalidModelFile(str(path), "is a folder, not a file (a model folder needs a config.json)")
        if not stat.S_ISREG(config_mode):
            return InvalidModelFile(str(config), f"is {kind_of(config_mode)}, not a regular file")
        return InvalidModelFile(str(path), "is a folder, not a file")
    return InvalidModelFile(str(path), f"is {kind_of(mode)}, not a regular file; refusing to read it")


def _os_error(path: Path, exc: OSError) -> InvalidModelFile:
    if isinstance(exc, FileNotFoundError):
        return InvalidModelFile(str(path), "no such file")
    if isinstance(exc, IsADirectoryError):
        return _refusal(path, stat.S_IFDIR)
    return InvalidModelFile(str(path), f"cannot be read ({exc.strerror or exc})")


def check_regular_file(path: str | Path) -> os.stat_result:
    """The stat of `path` (links followed) if it is a regular file; else InvalidModelFile naming what it is.

    For callers that hand the path to another library (llama.cpp, safetensors, tokenizers).
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise _os_error(path, exc) from None
    if not stat.S_ISREG(info.st_mode):
        raise _refusal(path, info.st_mode)
    return info


def open_regular_file(path: str | Path) -> BinaryIO:
    """Open `path` for binary reading if it is a regular file; else InvalidModelFile, at once.

    The file is opened non-blocking and checked on the open descriptor (no window between the check
    and the open for a swap to a FIFO), then switched back to blocking reads.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _BINARY)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError | PermissionError):
            try:  # e.g. ENXIO opening a socket: say what it is
                mode = path.stat().st_mode
            except OSError:
                mode = stat.S_IFREG
            if not stat.S_ISREG(mode):
                raise _refusal(path, mode) from None
        raise _os_error(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(path, info.st_mode)
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

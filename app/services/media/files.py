"""The bytes of a file a message is to carry (an image, a clip of audio), read without ever blocking.

A path is looked at before it is opened: anything but a regular file (a FIFO, whose open would wait for a
writer; a device, which may never end; a folder) is refused by its stat, and the file is then opened
non-blocking and checked again on the open descriptor (models.formats.local_file), so a swap in between is
caught too. Its size is checked before it is read, so a 2 GB file costs a stat, not 2 GB.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from models.formats.errors import InvalidModelFile
from models.formats.local_file import kind_of, open_regular_file
from models.units import human_size


class FileProblem(Exception):
    """Why a file's bytes cannot be had; `problem` starts with a verb ("is a FIFO (named pipe), ...")."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def read_media_file(path: Path, *, max_bytes: int, kind: str) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them; `kind` ("image", "audio") names
    what it should be in the messages.

    Raises:
        FileProblem: missing, unreadable, not a regular file (told by its stat, before any open), or larger
            than `max_bytes`.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileProblem("does not exist") from None
    except OSError as exc:
        raise FileProblem(f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise FileProblem(f"is {kind_of(info.st_mode)}, not {'an' if kind[0] in 'aeiou' else 'a'} {kind} file")
    if info.st_size > max_bytes:
        raise FileProblem(too_large(info.st_size, max_bytes, kind))
    try:
        file = open_regular_file(path)  # non-blocking, checked again on the descriptor
    except InvalidModelFile as exc:
        raise FileProblem(exc.problem) from None
    try:
        with file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise FileProblem(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:  # it grew since its stat
        raise FileProblem(too_large(len(data), max_bytes, kind))
    return data


def too_large(size: int, max_bytes: int, kind: str) -> str:
    """The problem of a file over the size limit, in words."""
    return f"is {human_size(size)}; Tailor takes {kind} files of up to {human_size(max_bytes)}"

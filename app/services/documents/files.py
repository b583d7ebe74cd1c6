"""A document's file opened for reading, never blocking and never larger than the cap.

The same rules as the media intake (app/services/media/files.py), through the same opener
(models.formats.local_file): a path is stat'ed first, so a FIFO (whose open waits for a writer) or a
device (/dev/zero never ends) is refused without ever being opened for reading; the size is checked on that
stat, so a 2 GB file costs a stat and not 2 GB; then the file is opened non-blocking and checked again on the
descriptor. A folder's walk also passes the stat it listed: a file swapped for another (or for a link to
one outside the folder) between the listing and the open has another inode and is refused.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

from app.services.documents.errors import (
    DocumentMissing,
    DocumentUnreadable,
    FileTooLarge,
    NotARegularFile,
)
from app.services.documents.limits import DEFAULT_LIMITS, DocumentLimits
from models.formats.errors import InvalidModelFile
from models.formats.local_file import kind_of, open_regular_file
from models.units import human_size

_HASH_BLOCK = 1 << 20


def check_document_path(path: Path, limits: DocumentLimits = DEFAULT_LIMITS) -> os.stat_result:
    """The stat of `path` (links followed) if it is a regular file within the size cap.

    Raises:
        DocumentMissing, DocumentUnreadable, NotARegularFile, FileTooLarge.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise DocumentMissing(path.name, "does not exist (removed before it could be read?)") from None
    except OSError as exc:
        raise DocumentUnreadable(path.name, f"cannot be read ({exc.strerror or exc})") from None
    _check_stat(path, info, limits)
    return info


def _check_stat(path: Path, info: os.stat_result, limits: DocumentLimits) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(path.name, f"is {kind_of(info.st_mode)}, not a document; it was not opened")
    if info.st_size > limits.max_file_bytes:
        raise FileTooLarge(path.name, f"is {human_size(info.st_size)}; Tailor reads documents of up to "
                                      f"{human_size(limits.max_file_bytes)} (MAX_FILE_BYTES)")


def open_document(path: Path, limits: DocumentLimits = DEFAULT_LIMITS, *,
                  listed: os.stat_result | None = None) -> BinaryIO:
    """`path` opened for binary reading, after its stat passed check_document_path.

    `listed` is the stat a folder's walk saw (links not followed): the opened file must be that same file
    (device and inode), so one replaced since, by a link or otherwise, is refused.

    Raises:
        DocumentMissing, DocumentUnreadable, NotARegularFile, FileTooLarge.
    """
    info = check_document_path(path, limits)
    if listed is not None and (info.st_dev, info.st_ino) != (listed.st_dev, listed.st_ino):
        raise DocumentUnreadable(path.name, "was replaced while the folder was being read; it was skipped")
    try:
        file = open_regular_file(path)  # non-blocking, checked again on the descriptor
    except InvalidModelFile as exc:
        if "no such file" in exc.problem:
            raise DocumentMissing(path.name, "does not exist (removed before it could be read?)") from None
        raise DocumentUnreadable(path.name, exc.problem) from None
    opened = os.fstat(file.fileno())
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        file.close()
        raise DocumentUnreadable(path.name, "was replaced while it was being opened; it was skipped")
    try:
        _check_stat(path, opened, limits)  # it may have grown since its stat
    except Exception:
        file.close()
        raise
    return file


def sha256_of(file: BinaryIO) -> str:
    """The hex sha256 of an open file's bytes, read in blocks; the file is left at its start."""
    digest = hashlib.sha256()
    file.seek(0)
    while block := file.read(_HASH_BLOCK):
        digest.update(block)
    file.seek(0)
    return digest.hexdigest()

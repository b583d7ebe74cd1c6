"""What can be wrong with the chat history file, in words for the user, and the store's errors."""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# read_only: the file or its folder cannot be written; full: no room left for it;
# unwritable: another write failure (an I/O error, a lock held too long); damaged: pages unreadable.
ProblemKind = Literal["read_only", "full", "unwritable", "damaged"]

_SQLITE_KINDS: dict[int, ProblemKind] = {
    sqlite3.SQLITE_READONLY: "read_only",
    sqlite3.SQLITE_PERM: "read_only",
    sqlite3.SQLITE_FULL: "full",
    sqlite3.SQLITE_CORRUPT: "damaged",
    sqlite3.SQLITE_NOTADB: "damaged",
    sqlite3.SQLITE_IOERR: "unwritable",
    sqlite3.SQLITE_CANTOPEN: "unwritable",
    sqlite3.SQLITE_BUSY: "unwritable",
    sqlite3.SQLITE_LOCKED: "unwritable",
}
_OS_KINDS: dict[int, ProblemKind] = {
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EROFS: "read_only",
    errno.EACCES: "read_only",
    errno.EPERM: "read_only",
}


class StoreError(RuntimeError):
    """The chat history cannot be opened or used."""


class StoreTooNewError(StoreError):
    """The database was written by a newer Tailor than this one."""


class StoreDamagedError(StoreError):
    """The file's pages cannot be read: nothing of it can be shown until it is recovered.

    Attributes:
        problem: what is wrong, for the banner that offers to recover it.
    """

    def __init__(self, problem: HistoryProblem):
        super().__init__(
            f"The chat history is damaged ({problem.path}: {problem.detail}). Open the Tailor window to "
            "recover what can be read into a new file."
        )
        self.problem = problem


class StoreUnwritableError(StoreError):
    """A change was refused: the history is read-only, full, or cannot be written.

    Attributes:
        problem: why.
    """

    def __init__(self, problem: HistoryProblem):
        super().__init__(f"Nothing was saved: {problem.reason} ({problem.path}: {problem.detail}).")
        self.problem = problem


@dataclass(slots=True, frozen=True)
class HistoryProblem:
    """Why the chat history is shown read-only, or not at all.

    Attributes:
        kind: what went wrong.
        path: the history file.
        detail: SQLite's or the system's own words.
    """

    kind: ProblemKind
    path: Path
    detail: str

    @property
    def reason(self) -> str:
        """Why nothing can be saved, short (the message box's placeholder, the Send button's tooltip)."""
        return {
            "read_only": "the chat history is read-only",
            "full": "the disk that holds the chat history is full",
            "unwritable": "the chat history cannot be written",
            "damaged": "the chat history is damaged",
        }[self.kind]

    @property
    def message(self) -> str:
        """The whole story, in one paragraph."""
        if self.kind == "damaged":
            return (
                f"Your chat history ({self.path}) is damaged: {self.detail}. Tailor can copy what SQLite can "
                "still read into a new file and keep the damaged one beside it."
            )
        fix = {
            "read_only": "Make the file and its folder writable",
            "full": "Free some disk space",
            "unwritable": "Fix the cause",
        }[self.kind]
        return (
            f"Sending is off: {self.reason} ({self.path}: {self.detail}). Your chats are shown, "
            f"but nothing new can be saved. {fix}, then press Try again."
        )


def problem_kind(exc: BaseException) -> ProblemKind | None:
    """The kind of problem an SQLite or OS error means; None for anything else (a bug, not the file)."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return _SQLITE_KINDS.get(code & 0xFF) if code is not None else None
    if isinstance(exc, OSError):
        return _OS_KINDS.get(exc.errno, "unwritable") if exc.errno is not None else "unwritable"
    return None

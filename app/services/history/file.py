"""The chat history's file: opened (read-only or refused with the reason when it must be), reopened,
closed, and written one transaction at a time. store.py says what is in it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from app.services.history.opening import (
    Connector,
    OpenedHistory,
    empty_history,
    mark_interrupted,
    open_history,
    open_sqlite,
)
from app.services.history.problems import (
    HistoryProblem,
    StoreDamagedError,
    StoreUnwritableError,
    problem_kind,
)
from app.services.paths import AppPaths


def default_db_path() -> Path:
    """Where the chat history lives: `<user data dir>/Tailor/chats.sqlite3` (or under $TAILOR_HOME)."""
    return AppPaths.default().chat_db


class HistoryFile:
    """One SQLite file of chat history (ChatStore adds what it holds).

    Args:
        path: the database file; None uses `default_db_path()`. Parent folders are created.
        connect: opens the file read-write or read-only; tests give one that puts it on a
            read-only or full medium.
        recover: mark replies left 'streaming' as 'interrupted' (the window, at start). False for
            whatever opens the file beside a window that may be writing a reply now (the CLI's chat
            commands, a background export or import).

    Attributes:
        problem: None when changes are saved; otherwise why the history is shown read-only,
            and every change raises StoreUnwritableError.
        recovered: replies a crash left streaming, marked interrupted when the file was opened.

    Raises:
        StoreDamagedError: the file's pages cannot be read (`ChatStore.unavailable` stands in).
        StoreTooNewError: the file comes from a newer version of Tailor.
        StoreError: the file cannot be opened at all.
    """

    def __init__(self, path: Path | str | None = None, *, connect: Connector = open_sqlite, recover: bool = True):
        self.path = Path(path) if path is not None else default_db_path()
        self._connect, self._recover = connect, recover
        self._attach(open_history(self.path, connect, recover))

    @classmethod
    def unavailable(cls, error: StoreDamagedError, *, connect: Connector = open_sqlite) -> Self:
        """An empty stand-in that saves nothing, for a history that cannot be read: the window opens
        over it and offers to recover the file; `reopen()` then opens the real one."""
        store = cls.__new__(cls)
        store.path, store._connect, store._recover = error.problem.path, connect, True
        store._attach(OpenedHistory(empty_history(), error.problem, 0))
        return store

    def _attach(self, opened: OpenedHistory) -> None:
        self._db, self.problem, self.recovered = opened.db, opened.problem, opened.recovered

    @property
    def writable(self) -> bool:
        return self.problem is None

    def reopen(self) -> None:
        """Open the file again, after it was recovered or what kept it read-only was fixed.

        Raises:
            StoreError: as the constructor; the store is left as it was.
        """
        opened = open_history(self.path, self._connect, self._recover)
        self._db.close()
        self._attach(opened)

    def close(self) -> None:
        self._db.close()

    def recover_interrupted(self) -> int:
        """Mark replies left 'streaming' by a crash as 'interrupted'; returns how many."""
        if self.problem is not None:
            raise StoreUnwritableError(self.problem)
        return mark_interrupted(self._db)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction; SQLite's write errors become StoreUnwritableError / StoreDamagedError."""
        if self.problem is not None:
            raise StoreUnwritableError(self.problem)
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            kind = problem_kind(exc)
            if kind is None:
                raise
            problem = HistoryProblem(kind, self.path, str(exc))
            # The disk filled up (or the file became read-only) while Tailor runs: from now on the
            # history is shown read-only with the reason, as if it had been so at start.
            self.problem = problem
            raise (StoreDamagedError if kind == "damaged" else StoreUnwritableError)(problem) from exc
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

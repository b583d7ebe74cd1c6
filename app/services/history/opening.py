"""Opening the chat history file: read-write when it can be, a read-only copy when it cannot.

A file that is read-only, on a full disk, or that cannot be written for another reason still
shows its chats: they are copied into memory (upgraded there if the file is older), and the
store refuses changes with the reason. A file whose pages cannot be read is refused with
StoreDamagedError, which carries what the window needs to offer a recovery.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.services.history.problems import HistoryProblem, StoreDamagedError, StoreError, problem_kind
from app.services.history.schema import check_not_newer, migrate, schema_version
from app.services.history.tool_steps import ToolStepsError, steps_from_json, steps_to_json, unfinished_ended
from models.formats.local_file import kind_of

# Opens an SQLite connection to a path, read-write or read-only (isolation_level=None).
# The store takes one so that tests can put the file on a read-only or full medium.
Connector = Callable[[Path, bool], sqlite3.Connection]

# Below this much room (on the disk, or under SQLite's page limit) the history opens read-only:
# a reply or two more would fail to save half-way.
MIN_ROOM_BYTES = 2 * 1024 * 1024


def open_sqlite(path: Path, read_only: bool) -> sqlite3.Connection:
    """The real medium: `path` read-write, or read-only (SQLite's mode=ro, then immutable=1 when the
    folder is read-only too and the WAL index cannot be created)."""
    if not read_only:
        return sqlite3.connect(path, isolation_level=None)
    uri = path.resolve().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError as exc:
        if problem_kind(exc) not in ("read_only", "unwritable"):
            raise
        db.close()
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)


@dataclass(slots=True)
class OpenedHistory:
    """A connection to the history, and why it is read-only if it is."""

    db: sqlite3.Connection
    problem: HistoryProblem | None
    recovered: int  # replies left streaming by a crash, now marked interrupted


def open_history(path: Path, connect: Connector = open_sqlite, recover: bool = True) -> OpenedHistory:
    """Open `path` read-write, or as a read-only copy with the problem that prevents writing; with
    `recover`, replies a crash left 'streaming' are marked 'interrupted' (only the window does it: a
    CLI command or a background export opened beside it would mark the reply it is writing now).

    Raises:
        StoreDamagedError: the file's pages cannot be read.
        StoreTooNewError: the file comes from a newer Tailor.
        StoreError: the file cannot be opened at all (e.g. the path is a folder).
    """
    _refuse_special(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = connect(path, False)
    except (sqlite3.Error, OSError) as exc:
        return _read_only(path, connect, _problem(path, exc))
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        _check_pages(db, path)
        migrate(db)
        # Also the write probe: an UPDATE needs the write lock even when no row matches, so a
        # read-only file fails here ("attempt to write a readonly database"), not at the first message.
        if recover:
            recovered = mark_interrupted(db)
        else:
            recovered = 0
            db.execute("UPDATE messages SET state = state WHERE 0")  # the write probe alone
        room = room_left(db, path)
    except StoreError:
        db.close()
        raise
    except (sqlite3.Error, OSError) as exc:
        db.close()
        return _read_only(path, connect, _problem(path, exc))
    if room < MIN_ROOM_BYTES:
        problem = HistoryProblem("full", path, f"only {_size(room)} left")
        copy = _copy_to_memory(db)
        db.close()
        return OpenedHistory(copy, problem, recovered)
    return OpenedHistory(db, None, recovered)


def empty_history() -> sqlite3.Connection:
    """An empty history in memory, at the current schema."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db)
    return db


# What a call that was waiting or running when Tailor stopped says instead of a result.
CALL_CUT_OFF = "Tailor closed before this call ended."


def mark_interrupted(db: sqlite3.Connection) -> int:
    """Mark replies left 'streaming' by a crash as 'interrupted', their calls that had not ended as
    cancelled (nothing will answer them now); returns how many replies."""
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = db.execute("SELECT id, tool_steps FROM messages WHERE state = 'streaming' AND tool_steps != ''")
        for message_id, text in rows.fetchall():
            try:
                steps = steps_from_json(text)
            except ToolStepsError:
                continue  # damaged: read as no steps (records.message_of), left as it is
            ended = unfinished_ended(steps, CALL_CUT_OFF)
            if ended != steps:
                db.execute("UPDATE messages SET tool_steps = ? WHERE id = ?", (steps_to_json(ended), message_id))
        count = db.execute("UPDATE messages SET state = 'interrupted' WHERE state = 'streaming'").rowcount
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return count


def _refuse_special(path: Path) -> None:
    """A history is a regular file (reached through a link or not) or nothing yet: SQLite's reads of a FIFO
    would wait for a writer forever, and its writes would go into a device (`--db /dev/full`)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # absent (created), or unreadable: SQLite's own error says which
    if not stat.S_ISREG(mode):
        raise StoreError(f"Cannot open the chat history {path}: it is {kind_of(mode)}, not a regular file")


def room_left(db: sqlite3.Connection, path: Path) -> int:
    """Bytes the history can still grow by: the disk's free space, or SQLite's page limit if lower."""
    page_size, pages, limit, free_pages = (
        db.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("page_size", "page_count", "max_page_count", "freelist_count")
    )
    return min(shutil.disk_usage(path.parent).free, (limit - pages + free_pages) * page_size)


def _read_only(path: Path, connect: Connector, problem: HistoryProblem) -> OpenedHistory:
    """A copy of the file in memory, upgraded there if it is older, with the problem that makes it read-only."""
    if problem.kind == "damaged":
        raise StoreDamagedError(problem)
    if not path.is_file():  # nothing written yet, and it cannot be: an empty history
        return OpenedHistory(empty_history(), problem, 0)
    try:
        source = connect(path, True)
    except (sqlite3.Error, OSError) as exc:
        raise _cannot_read(path, exc) from exc
    try:
        _check_pages(source, path)
        check_not_newer(schema_version(source))
        copy = _copy_to_memory(source)
    except (sqlite3.Error, OSError) as exc:
        raise _cannot_read(path, exc) from exc
    finally:
        source.close()
    migrate(copy)
    return OpenedHistory(copy, problem, mark_interrupted(copy))


def _copy_to_memory(source: sqlite3.Connection) -> sqlite3.Connection:
    copy = sqlite3.connect(":memory:", isolation_level=None)
    source.backup(copy)
    return copy


def _check_pages(db: sqlite3.Connection, path: Path) -> None:
    """Read every page once (quick_check: ~25 ms for 70 MB), so damage shows now and not in the middle
    of the window's start; raises StoreDamagedError with SQLite's first complaint."""
    rows = db.execute("PRAGMA quick_check(1)").fetchall()
    if rows and rows[0][0] != "ok":
        # e.g. "*** in database main ***\nPage 15: btreeInitPage() returns error code 11"
        where = [line for line in str(rows[0][0]).splitlines() if line.strip() and not line.startswith("***")]
        detail = "database disk image is malformed" + (f" ({where[0]})" if where else "")
        raise StoreDamagedError(HistoryProblem("damaged", path, detail))


def _problem(path: Path, exc: BaseException) -> HistoryProblem:
    kind = problem_kind(exc)
    if kind is None:
        raise StoreError(f"Cannot open the chat history at {path}: {exc}") from exc
    if kind == "unwritable" and not _may_write(path):
        # SQLite says "unable to open database file" when it may not create the WAL beside the file.
        return HistoryProblem("read_only", path, f"{exc}; this user may not write to {path.parent}")
    return HistoryProblem(kind, path, str(exc))


def _may_write(path: Path) -> bool:
    """Whether this user may change the file and create the WAL beside it (always true for root)."""
    folder_ok = os.access(path.parent, os.W_OK | os.X_OK)
    return folder_ok and (not path.exists() or os.access(path, os.W_OK))


def _cannot_read(path: Path, exc: BaseException) -> StoreError:
    if problem_kind(exc) == "damaged":
        return StoreDamagedError(HistoryProblem("damaged", path, str(exc)))
    return StoreError(f"Cannot open the chat history at {path}: {exc}")


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n < 1024 * 1024 else f"{n / 2**20:.1f} MiB"

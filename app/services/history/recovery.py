"""Recovering a damaged chat history: what SQLite can still read goes into a new file.

Rows are read by rowid, so an unreadable page costs the rows on it and no more: when a read
fails, the next readable rowid is found by probing ahead (doubling, then bisecting), the way
SQLite's own `.recover` walks past bad pages. Indexes are never read (they are rebuilt).
The damaged file is kept beside the new one (`chats.damaged-<date>-<time>.sqlite3`), with its
WAL, so nothing more is lost if a better tool can read more of it later.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.services.history.backup import sync_to_disk
from app.services.history.opening import open_sqlite
from app.services.history.records import MESSAGE_STATES, ROLES
from app.services.history.schema import LINE_UP_MESSAGES, migrate
from app.services.history.tool_steps import ToolStepsError, steps_from_json

log = logging.getLogger(__name__)

MAX_ROWID = 2**63 - 1
_TABLES = ("conversations", "messages", "message_media", "presets")  # parents first


@dataclass(slots=True, frozen=True)
class RecoveryReport:
    """What a recovery saved.

    Attributes:
        damaged_copy: where the damaged file is kept now.
        conversations, messages, presets: rows copied into the new file.
        unreadable: places where rows could not be read (a damaged page, a row that made no sense).
    """

    damaged_copy: Path
    conversations: int
    messages: int
    presets: int
    unreadable: int

    def summary(self) -> str:
        lost = f"; {self.unreadable} damaged part(s) could not be read" if self.unreadable else ""
        return (
            f"Recovered {self.conversations} chat(s) with {self.messages} message(s) and {self.presets} preset(s){lost}. "
            f"The damaged file is kept as {self.damaged_copy}."
        )


def recover_history(path: Path) -> RecoveryReport:
    """Replace the damaged history at `path` with a new file holding what can be read of it.

    Nothing may have the file open. The new file is complete on disk before it takes the
    damaged one's place (an atomic rename); the damaged one stays beside it.

    Raises:
        OSError: the new file could not be written (the damaged one is then untouched).
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fresh = path.with_name(f"{path.name}.recovering")
    damaged = path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}")
    _remove(fresh)
    salvage = _Salvage()
    out = sqlite3.connect(fresh, isolation_level=None)
    try:
        migrate(out)  # the current schema, in the default rollback journal: no side file to carry along
        out.execute("BEGIN")
        counts = salvage.copy(path, out)
        out.execute("COMMIT")
    finally:
        out.close()
    sync_to_disk(fresh)
    # The WAL and its index go first: a WAL left beside the new file would be replayed into it.
    for side in ("-wal", "-shm"):
        if Path(f"{path}{side}").exists():
            os.replace(f"{path}{side}", f"{damaged}{side}")
    try:
        os.link(path, damaged)  # the damaged file gets its second name before the first is taken
    except OSError:
        shutil.copy2(path, damaged)
    os.replace(fresh, path)
    sync_to_disk(path.parent)
    report = RecoveryReport(damaged, *counts, salvage.unreadable)
    log.warning("Chat history recovered: %s", report.summary())
    return report


class _Salvage:
    """Copies the readable rows of a damaged history into a new one, counting what it could not read."""

    def __init__(self) -> None:
        self.unreadable = 0

    def copy(self, path: Path, out: sqlite3.Connection) -> tuple[int, int, int]:
        try:
            source = open_sqlite(path, read_only=True)
        except sqlite3.DatabaseError as exc:
            log.warning("Nothing of %s can be read: %s", path, exc)
            self.unreadable += 1
            return 0, 0, 0
        try:
            counts = {table: self._copy_table(source, out, table) for table in _TABLES}
            before_branches = not _has_column(source, "messages", "parent_id")
        finally:
            source.close()
        if before_branches:  # a file from before branches: each chat one line, as its upgrade would make it
            out.execute(LINE_UP_MESSAGES)
        else:  # a message whose parent was on a lost page follows the message before it
            out.execute(f"{LINE_UP_MESSAGES} WHERE parent_id IS NOT NULL AND parent_id NOT IN (SELECT id FROM messages)")
        counts["conversations"] += self._adopt_orphans(out)
        # The images and clips of messages lost with a damaged page go with them (the new file is written without
        # foreign keys enforced; the files stay in the media store until its next collect).
        out.execute("DELETE FROM message_media WHERE message_id NOT IN (SELECT id FROM messages)")
        return counts["conversations"], counts["messages"], counts["presets"]

    def _copy_table(self, source: sqlite3.Connection, out: sqlite3.Connection, table: str) -> int:
        wanted = [row[1] for row in out.execute(f"PRAGMA table_info({table})")]
        try:
            present = {row[1] for row in source.execute(f"PRAGMA table_info({table})")}
        except sqlite3.DatabaseError:
            self.unreadable += 1
            return 0
        columns = [c for c in wanted if c in present]
        if not columns:
            return 0
        # The file's own presets replace the default the new file starts with.
        verb = "INSERT OR REPLACE" if table == "presets" else "INSERT OR IGNORE"
        insert = f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        copied = 0
        for row in self._rows(source, table, columns):
            values = _clean(table, dict(zip(columns, row, strict=True)))
            if values is None or out.execute(insert, [values[c] for c in columns]).rowcount != 1:
                self.unreadable += 1
                continue
            copied += 1
        return copied

    def _rows(self, source: sqlite3.Connection, table: str, columns: list[str]) -> Iterator[tuple]:
        """The rows SQLite can read, in rowid order, stepping over damaged pages."""
        names = ", ".join(columns)
        after = -MAX_ROWID - 1
        while True:
            try:
                query = f"SELECT rowid, {names} FROM {table} WHERE rowid > ? ORDER BY rowid"
                for row in source.execute(query, (after,)):
                    after = row[0]
                    yield row[1:]
                return
            except sqlite3.DatabaseError as exc:
                log.info("Damaged rows in %s after rowid %s: %s", table, after, exc)
            # The scan stopped at a damaged page, or a row before it (the cursor steps a row ahead).
            resume, skipped = _resume_after(source, table, after)
            self.unreadable += skipped
            if resume is None:
                return
            try:  # a lookup by rowid goes straight to the row's own page
                row = source.execute(f"SELECT {names} FROM {table} WHERE rowid = ?", (resume,)).fetchone()
            except sqlite3.DatabaseError:
                self.unreadable += 1  # its page, or its overflow pages, are damaged
            else:
                if row is not None:
                    yield row
            after = resume

    def _adopt_orphans(self, out: sqlite3.Connection) -> int:
        """Messages whose conversation was on a lost page get a conversation of their own."""
        orphans = out.execute(
            "SELECT conversation_id, min(created), max(created) FROM messages"
            " WHERE conversation_id NOT IN (SELECT id FROM conversations) GROUP BY conversation_id"
        ).fetchall()
        out.executemany(
            "INSERT INTO conversations (id, title, created, updated, settings) VALUES (?, 'Recovered chat', ?, ?, '{}')",
            orphans,
        )
        return len(orphans)


def _resume_after(source: sqlite3.Connection, table: str, after: int) -> tuple[int | None, bool]:
    """Where to read on past `after`: the next rowid a seek reaches, and whether damage was stepped
    over to get there. (None, True): nothing more can be read."""

    def first_past(at: int) -> tuple[bool, int | None]:  # can SQLite find the first row past `at`, and which?
        try:
            row = source.execute(f"SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 1", (at,)).fetchone()
        except sqlite3.DatabaseError:
            return False, None
        return True, row[0] if row else None

    def probe(at: int) -> bool:
        return first_past(at)[0]

    readable, successor = first_past(after)
    if readable:  # no damaged page before the next row
        return successor, False
    low, step = after, 1  # probe(low) fails; look further and further ahead for a place that reads
    while True:
        high = min(after + step, MAX_ROWID)
        if probe(high):
            break
        if high == MAX_ROWID:
            return None, True
        low, step = high, step * 2
    while high - low > 1:  # the first place past the damage that reads
        middle = (low + high) // 2
        low, high = (low, middle) if probe(middle) else (middle, high)
    # probe(high - 1) fails, so row `high` (if there is one) may sit on the damaged page or past it:
    # the caller looks it up by rowid.
    return high, True


def _clean(table: str, row: dict) -> dict | None:
    """`row` if it makes sense as a row of `table` (a damaged page can read as nonsense), else None."""
    try:
        if table == "conversations":
            ok = isinstance(row["title"], str) and _is_number(row["created"]) and _is_number(row["updated"])
            if "settings" in row:
                row["settings"] = _json_or(row["settings"], "{}")
        elif table == "messages":
            ok = (row["role"] in ROLES and isinstance(row["content"], str) and row["state"] in MESSAGE_STATES
                  and isinstance(row["conversation_id"], int) and _is_number(row["created"]))
            if row["state"] == "streaming":
                row["state"] = "interrupted"
            if "stats" in row:
                row["stats"] = _json_or(row["stats"], None)
            if "reasoning" in row and not isinstance(row["reasoning"], str):
                row["reasoning"] = ""
            if "reasoning_closed" in row and row["reasoning_closed"] not in (0, 1):
                row["reasoning_closed"] = 1
            if "tool_steps" in row and not _steps_readable(row["tool_steps"]):
                row["tool_steps"] = ""  # the reply stays, without the steps that cannot be read
        elif table == "message_media":
            ok = (all(isinstance(row[k], int) for k in ("message_id", "position", "width", "height"))
                  and all(isinstance(row[k], str) for k in ("sha256", "format", "name"))
                  and len(row["sha256"]) == 64 and all(c in "0123456789abcdef" for c in row["sha256"])
                  and row.get("kind", "image") in ("image", "audio")
                  and (row.get("seconds") is None or (_is_number(row["seconds"]) and row["seconds"] >= 0)))
        else:
            ok = isinstance(row["name"], str) and bool(row["name"].strip()) and isinstance(row["pinned"], int)
            ok = ok and _json_or(row["settings"], None) is not None
    except (KeyError, TypeError):
        return None
    return row if ok else None


def _has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    try:
        return column in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError:
        return False


def _is_number(value: object) -> bool:
    return isinstance(value, int | float)


def _steps_readable(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        steps_from_json(text)
    except ToolStepsError:
        return False
    return True


def _json_or(text: object, fallback: str | None) -> str | None:
    if not isinstance(text, str):
        return fallback
    try:
        json.loads(text)
    except ValueError:
        return fallback
    return text


def _remove(path: Path) -> None:
    for name in (path, Path(f"{path}-journal")):
        name.unlink(missing_ok=True)

"""A daily copy of the chat history, so a damaged file is never the only one: the last 7 are kept.

`backups/chats-YYYY-MM-DD.sqlite3` beside the history file, made with SQLite's `VACUUM INTO`
from a read-only connection (it never writes to the history, and WAL lets the window keep
saving meanwhile), first under a `.partial` name and renamed once it is on disk: a copy
that is there is whole. A backup that fails is logged and retried at the next start.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from datetime import date
from pathlib import Path

from app.services.history.opening import open_sqlite

log = logging.getLogger(__name__)

BACKUPS_KEPT = 7


def backup_folder(db_path: Path) -> Path:
    return db_path.parent / "backups"


def backup_path(db_path: Path, day: date) -> Path:
    """Where the backup of `day` goes: `backups/<stem>-YYYY-MM-DD<suffix>`."""
    return backup_folder(db_path) / f"{db_path.stem}-{day.isoformat()}{db_path.suffix}"


def list_backups(db_path: Path) -> list[Path]:
    """The backups of `db_path`, newest first."""
    pattern = re.compile(re.escape(db_path.stem) + r"-\d{4}-\d{2}-\d{2}" + re.escape(db_path.suffix) + "$")
    folder = backup_folder(db_path)
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if pattern.match(p.name)), reverse=True)


def backup_due(db_path: Path, today: date) -> bool:
    return db_path.is_file() and not backup_path(db_path, today).exists()


def make_backup(db_path: Path, today: date) -> Path:
    """Copy `db_path` to today's backup and drop all but the newest BACKUPS_KEPT.

    Raises:
        sqlite3.Error, OSError: the copy failed (the older backups are untouched).
    """
    target = backup_path(db_path, today)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)  # left by a start that ended mid-copy
    source = open_sqlite(db_path, read_only=True)
    try:
        source.execute("VACUUM INTO ?", (str(partial),))
    finally:
        source.close()
    sync_to_disk(partial)
    os.replace(partial, target)
    sync_to_disk(target.parent)
    for old in list_backups(db_path)[BACKUPS_KEPT:]:
        old.unlink(missing_ok=True)
    return target


def start_daily_backup(db_path: Path, today: date | None = None) -> threading.Thread | None:
    """Make today's backup on a background thread if it is due; None when it is not.

    Never raises and never blocks: a failure is logged, and the next start tries again.
    """
    today = today or date.today()
    try:
        if not backup_due(db_path, today):
            return None
    except OSError as exc:
        log.warning("Cannot check the chat history's backups: %s", exc)
        return None
    thread = threading.Thread(target=_backup_logged, args=(db_path, today), name="history-backup", daemon=True)
    thread.start()
    return thread


def _backup_logged(db_path: Path, today: date) -> None:
    try:
        log.info("Backed up the chat history to %s", make_backup(db_path, today))
    except Exception as exc:  # noqa: BLE001 (a backup must never take the window down)
        log.warning("The daily backup of the chat history failed: %s", exc)


def sync_to_disk(path: Path) -> None:
    """fsync a file or a folder (after a rename), so what was written survives a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

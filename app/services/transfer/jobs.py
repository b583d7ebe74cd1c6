"""What Chat → Export… and Import… run on a background thread (no Qt, no widgets here).

SQLite connections belong to the thread that opened them, so each job opens the history file again
with a ChatStore of its own and closes it when done; the window's store is never touched off the GUI
thread. An export is written beside its target and renamed over it, so a failed or interrupted one
never leaves half a file where the user looks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from app.services.history.store import ChatStore
from app.services.transfer.export import ChatRecord, iter_chats, json_chunks, load_chats
from app.services.transfer.export_files import export_media, render, write_export_file, write_export_folder
from app.services.transfer.importer import ImportProgress, ImportResult, import_file
from app.services.transfer.user_files import check_target


class ExportError(Exception):
    """An export that could not be written; one line for the user."""


def export_chats(db_path: Path, ids: list[int] | None, fmt: str, target: Path, each: bool = False,
                 overwrite: bool = False, *, embed_media: bool = False, problems: list[str] | None = None,
                 with_files: bool = False) -> int:
    """Write the chats `ids` (None: all) as `fmt` ("md", "json", "html") to the file `target`, or with `each`
    a file per chat into the folder `target` (named after its title); how many chats were written. An existing
    file is replaced only with `overwrite` (TargetExists otherwise: the window asks, then runs it again).

    Images: inline in HTML; in JSON embedded with `embed_media`, else written into `<target name>-media/`
    beside it, as for Markdown (export_files.export_media); attached documents' originals likewise with
    `with_files`, else named only. Each image that could not be exported (its stored file missing or damaged)
    is left out and a line added to `problems`."""
    store = ChatStore(db_path, recover=False)  # the window may be writing a reply now
    try:
        if each:
            count = write_export_folder(target, load_chats(store, ids), fmt, overwrite=overwrite,
                                        media_store=store.media, embed_media=embed_media, problems=problems,
                                        with_files=with_files)
        else:
            media = export_media(store.media, fmt, target, embed=embed_media, overwrite=overwrite,
                                 with_files=with_files)
            if fmt == "json":  # a chat at a time: a large history is not held in memory twice
                counted = [0]
                write_export_file(target, json_chunks(_counting(iter_chats(store, ids), counted), media),
                                  overwrite=overwrite)
                count = counted[0]
            else:
                check_target(target, overwrite=overwrite)  # refused before any image is written beside it
                records = load_chats(store, ids)
                write_export_file(target, [render(fmt, records, media)], overwrite=overwrite)
                count = len(records)
            if problems is not None:
                problems += media.problems
    finally:
        store.close()
    if count == 0:
        raise ExportError("There are no chats to export.")
    return count


def import_chats(db_path: Path, path: Path, on_progress: Callable[[ImportProgress], None],
                 cancelled: Callable[[], bool]) -> ImportResult:
    """Import a Tailor export or ChatGPT's conversations.json into the history at `db_path`."""
    store = ChatStore(db_path, recover=False)  # the window may be writing a reply now
    try:
        return import_file(store, path, on_progress=on_progress, cancelled=cancelled)
    finally:
        store.close()


def import_summary(result: ImportResult) -> str:
    """"Imported 3 chats (2 skipped: already there)", and what else the user must know, in one line."""
    count = len(result.imported)
    text = f"Imported {count} chat{'' if count == 1 else 's'}"
    if result.skipped:
        text += f" ({len(result.skipped)} skipped: already there)"
    if result.problems:
        text += f"; {len(result.problems)} could not be read ({result.problems[0]})"
    if result.notes:
        text += f"; {len(result.notes)} mended on the way in ({result.notes[0]})"
    if result.error:
        text += f". {result.error}"
    if result.cancelled:
        text = f"Import cancelled. {text}"
    return text + ("" if text.endswith(".") else ".")


def _counting(records: Iterable[ChatRecord], counted: list[int]) -> Iterator[ChatRecord]:
    for record in records:
        counted[0] += 1
        yield record



"""Exports onto disk, for `tailor export` and Chat → Export…: one file of chats, or a file per chat in a folder.

Each file is written whole (app/services/transfer/user_files.py): never onto a device, a FIFO, a socket or a
link, and over an existing file only when the user agreed (`--force`, or the window's question). In
a folder, every chat gets a file name of its own, checked rather than assumed: two titles that clean up
to the same name (".", "..", "a/b" and "a-b"), or differ only in case (the folder may be on a disk that
ignores case), get "-2", "-3"...; Windows' reserved device names are never used, since exports travel.
Every target is checked before the first file is written, so a refusal writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from app.services.transfer.export import ChatRecord, json_chunks, safe_filename, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.user_files import TargetExists, check_folder, check_target, what_is_at, write_whole

FORMATS = ("json", "md", "html")
# Windows refuses these as file names, whatever the extension ("CON.md" is the console).
RESERVED_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                            *(f"LPT{i}" for i in range(1, 10))})


def render(fmt: str, records: Sequence[ChatRecord]) -> str:
    """The chats as one document: "md", "html" or "json" (Tailor's export)."""
    if fmt == "md":
        return to_markdown(list(records))
    if fmt == "html":
        return to_html(list(records))
    return "".join(json_chunks(records))


def portable(name: str) -> str:
    """`name` with a Windows device name (CON, COM1, "nul.tar.md"...) made into an ordinary one."""
    stem = name.split(".", 1)[0].rstrip(" ")
    return f"_{name}" if stem.upper() in RESERVED_NAMES else name


def file_names(records: Iterable[ChatRecord], ext: str) -> list[str]:
    """A file name for each chat (its title and stable id), no two alike even where case is ignored."""
    names, taken = [], set()
    for record in records:
        name = portable(safe_filename(record.conversation.title, record.uid, ext))
        stem, number = name[: -len(ext) - 1], 1
        while name.casefold() in taken:
            number += 1
            name = f"{stem}-{number}.{ext}"
        taken.add(name.casefold())
        names.append(name)
    return names


def write_export_file(path: Path, chunks: Iterable[str], *, overwrite: bool) -> None:
    """Write one export file (see user_files.write_whole)."""
    write_whole(path, chunks, overwrite=overwrite)


def write_export_folder(folder: Path, records: Sequence[ChatRecord], fmt: str, *, overwrite: bool) -> int:
    """Write a file per chat into `folder`; how many were written.

    Raises:
        TargetRefused: the folder is not one, or a chat's name is taken by something that is not a regular
            file (nothing is written).
        TargetExists: files of these chats are there and `overwrite` is False (nothing is written).
    """
    check_folder(folder)
    targets = [folder / name for name in file_names(records, fmt)]
    for target in targets:
        check_target(target, overwrite=True)  # a FIFO or a link of that name refuses the export whole
    existing = [t for t in targets if what_is_at(t) is not None]
    if existing and not overwrite:
        shown = ", ".join(t.name for t in existing[:3]) + (", …" if len(existing) > 3 else "")
        raise TargetExists(existing, f"{len(existing)} file{'' if len(existing) == 1 else 's'} of these chats "
                                     f"exist in {folder} ({shown}); use --force to replace them")
    for record, target in zip(records, targets, strict=True):
        write_whole(target, [render(fmt, [record])], overwrite=overwrite)
    return len(records)

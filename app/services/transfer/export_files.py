"""Exports onto disk, for `tailor export` and Chat → Export…: one file of chats, or a file per chat in a folder.

Each file is written whole (app/services/transfer/user_files.py): never onto a device, a FIFO, a socket or a
link, and over an existing file only when the user agreed (`--force`, or the window's question). In
a folder, every chat gets a file name of its own, checked rather than assumed: two titles that clean up
to the same name (".", "..", "a/b" and "a-b"), or differ only in case (the folder may be on a disk that
ignores case), get "-2", "-3"...; Windows' reserved device names are never used, since exports travel.
Every target is checked before the first file is written, so a refusal writes nothing. A chat's images
go as `export_media` says: inline in HTML, embedded in JSON when asked, else into `<file name>-media/`
beside each file (export_media.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from app.services.media.store import MediaStore
from app.services.transfer.export import ChatRecord, json_chunks, safe_filename, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.export_media import ExportMedia, media_folder_of
from app.services.transfer.user_files import TargetExists, check_folder, check_target, what_is_at, write_whole

FORMATS = ("json", "md", "html")
# Windows refuses these as file names, whatever the extension ("CON.md" is the console).
RESERVED_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                            *(f"LPT{i}" for i in range(1, 10))})


def render(fmt: str, records: Sequence[ChatRecord], media: ExportMedia | None = None) -> str:
    """The chats as one document: "md", "html" or "json" (Tailor's export), images as `media` carries them."""
    if fmt == "md":
        return to_markdown(list(records), media)
    if fmt == "html":
        return to_html(list(records), media)
    return "".join(json_chunks(records, media))


def export_media(store: MediaStore | None, fmt: str, target: Path | None, *, embed: bool = False,
                 overwrite: bool = False, with_files: bool = False) -> ExportMedia | None:
    """How an export of `fmt` to the file `target` carries its images: HTML inline; JSON embedded with
    `embed`, else in `<target name>-media/` beside it; Markdown in that folder. Written to no file (None:
    standard output), only embedded ones travel. None when there is no `store` (images named only)."""
    if store is None:
        return None
    embed = embed or fmt == "html"
    folder = media_folder_of(target) if target is not None and not embed else None
    return ExportMedia(store, embed=embed, folder=folder, overwrite=overwrite, with_files=with_files)


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


def write_export_folder(folder: Path, records: Sequence[ChatRecord], fmt: str, *, overwrite: bool,
                        media_store: MediaStore | None = None, embed_media: bool = False,
                        problems: list[str] | None = None, with_files: bool = False) -> int:
    """Write a file per chat into `folder`; how many were written. Images as `export_media` carries them
    (each file's own `-media` folder), from `media_store` (None: named only); a line for each image that
    could not be exported is added to `problems`.

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
        media = export_media(media_store, fmt, target, embed=embed_media, overwrite=overwrite, with_files=with_files)
        write_whole(target, [render(fmt, [record], media)], overwrite=overwrite)
        if media is not None and problems is not None:
            problems += media.problems
    return len(records)

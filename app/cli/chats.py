"""`tailor chats ls|rm|mv|pin|unpin|folders`, `tailor export` and `tailor import`: the chat history from the
command line, the window's twins (its list, folders and pins, Chat → Export and Import). No Qt."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.cli.errors import CliError
from app.services.history.store import ChatStore, Folder
from app.services.history.timestamps import checked_time, iso_time
from app.services.paths import AppPaths
from app.services.transfer.export import (
    UnknownChatError,
    display_title,
    find_chat_id,
    iter_chats,
    json_chunks,
    load_chats,
)
from app.services.transfer.export_files import (
    FORMATS,
    export_media,
    render,
    write_export_file,
    write_export_folder,
)
from app.services.transfer.importer import ChatImportError, ImportResult, folder_key, import_file, probe_file
from app.services.transfer.user_files import TargetRefused, check_target

_CHAT_HELP = "the chat's number (as `tailor chats ls` shows) or its UUID"


class ChatsError(CliError):
    """A chat that does not exist, a file that cannot be written or imported; one line for the user."""


def add_chats_parsers(subparsers: Any) -> None:
    """Add `chats` (ls, rm, mv, pin, unpin, folders), `export` and `import` to `parser.add_subparsers()`."""
    chats = subparsers.add_parser("chats", help="list, delete, file and pin the chats of the history")
    _ls_options(chats)
    chats.set_defaults(func=run_ls)
    sub = chats.add_subparsers(dest="chats_command")
    ls = sub.add_parser("ls", help="list the chats, pinned first, then most recently updated first")
    _ls_options(ls)
    rm = sub.add_parser("rm", help="delete a chat and its messages")
    rm.add_argument("chat", metavar="ID", help=_CHAT_HELP)
    rm.set_defaults(func=run_rm)
    mv = sub.add_parser("mv", help="put a chat in a folder (created when there is none of that name)")
    mv.add_argument("chat", metavar="ID", help=_CHAT_HELP)
    mv.add_argument("folder", metavar="FOLDER", nargs="?", help="the folder's name")
    mv.add_argument("--none", action="store_true", help="take the chat out of its folder")
    mv.set_defaults(func=run_mv)
    for name, pinned in (("pin", True), ("unpin", False)):
        cmd = sub.add_parser(name, help="pin a chat to the top of the list" if pinned else "unpin a chat")
        cmd.add_argument("chat", metavar="ID", help=_CHAT_HELP)
        cmd.set_defaults(func=run_pin, pinned=pinned)
    folders = sub.add_parser("folders", help="list the folders, with how many chats each holds")
    folders.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    folders.set_defaults(func=run_folders)
    for parser in sub.choices.values():
        if parser is not ls:
            _db_option(parser)

    export = subparsers.add_parser("export", help="write chats as Markdown, HTML or Tailor's JSON")
    _db_option(export)
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--chat", metavar="ID", help="one chat: its number or UUID")
    which.add_argument("--all", action="store_true", help="every chat")
    export.add_argument("--format", choices=FORMATS, required=True,
                        help="md, html (the branch each chat shows) or json (every branch; re-importable)")
    export.add_argument(
        "-o", "--output", type=Path, metavar="PATH",
        help="the file to write (default: stdout); an existing folder gets one file per chat",
    )
    export.add_argument("--force", action="store_true", help="replace files that are there already")
    export.add_argument("--embed-media", action="store_true",
                        help="json: the chats' images and audio clips inside the file (base64) rather than in a "
                             "<name>-media folder beside it; only so do they travel on stdout (html always holds "
                             "them)")
    export.add_argument("--with-files", action="store_true",
                        help="json: the originals of the documents attached to messages too (beside the file, or "
                             "inside it with --embed-media); without it they are named only")
    export.set_defaults(func=run_export)

    imp = subparsers.add_parser("import", help="add the chats of a Tailor JSON export or of ChatGPT's "
                                               "conversations.json (those already there are kept)")
    _db_option(imp)
    imp.add_argument("file", type=Path, help="a file written by `tailor export --format json`, or ChatGPT's")
    imp.set_defaults(func=run_import)


def _ls_options(parser: argparse.ArgumentParser) -> None:
    _db_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--folder", metavar="NAME", help="only the chats in this folder")
    parser.add_argument("--search", metavar="TEXT", help="only the chats whose title or messages (any branch) hold it")
    parser.set_defaults(func=run_ls)


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", type=Path, default=argparse.SUPPRESS, metavar="PATH",
        help="the chat history file (default: the one the window uses)",
    )


def _db_path(args: argparse.Namespace) -> Path:
    return getattr(args, "db", None) or AppPaths.default().chat_db


def _open(args: argparse.Namespace, create: bool = False) -> ChatStore:
    path = _db_path(args)
    if not create and not path.exists():
        raise ChatsError(f"No chat history at {path}")
    return ChatStore(path, recover=False)  # a window may be writing a reply into it now


def run_ls(args: argparse.Namespace) -> int:
    if not _db_path(args).exists():
        if args.folder:
            raise ChatsError(f"No folder {args.folder!r} (see `tailor chats folders`).")
        print(json.dumps({"chats": []}) if args.json else "No chats.")
        return 0
    store = _open(args)
    try:
        folders = {f.id: f.name for f in store.list_folders()}
        where = {} if args.folder is None else {"folder_id": _folder(store, args.folder).id}
        rows = [(c, store.conversation_uid(c.id), store.message_count(c.id))
                for c in store.list_conversations(args.search or "", **where)]
    finally:
        store.close()
    if args.json:
        chats = [{"number": c.id, "id": uid, "title": c.title, "messages": n,
                  "created": checked_time(c.created), "updated": checked_time(c.updated), "folder": folders.get(c.folder_id), "pinned": c.pinned}
                 for c, uid, n in rows]
        print(json.dumps({"chats": chats}, ensure_ascii=False))
        return 0
    if not rows:
        print("No chats.")
    for c, _uid, n in rows:
        folder = f"[{display_title(folders[c.folder_id])}] " if c.folder_id in folders else ""
        pin = "*" if c.pinned else " "
        print(f"{c.id:>5} {pin} {iso_time(c.updated)}  {n:>4} messages  {folder}{display_title(c.title)}")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    store = _open(args)
    try:
        cid = _chat_id(store, args.chat)
        title = store.get_conversation(cid).title
        store.delete_conversation(cid)
    finally:
        store.close()
    print(f"Deleted chat {cid}: {display_title(title)}")
    return 0


def run_mv(args: argparse.Namespace) -> int:
    if (args.folder is None) == (not args.none):
        raise ChatsError("Give the folder's name, or --none to take the chat out of its folder.")
    store = _open(args)
    try:
        cid = _chat_id(store, args.chat)
        title = display_title(store.get_conversation(cid).title)
        if args.none:
            store.move_conversation(cid, None)
            print(f"Chat {cid} ({title}) is in no folder.")
            return 0
        folder = _find_folder(store, args.folder)
        if folder is None:
            folder = _create_folder(store, args.folder)
            print(f"Created folder {folder.name!r}.")
        store.move_conversation(cid, folder.id)
        print(f"Moved chat {cid} ({title}) to {folder.name!r}.")
    finally:
        store.close()
    return 0


def run_pin(args: argparse.Namespace) -> int:
    store = _open(args)
    try:
        cid = _chat_id(store, args.chat)
        title = display_title(store.get_conversation(cid).title)
        store.set_pinned(cid, args.pinned)
    finally:
        store.close()
    print(f"{'Pinned' if args.pinned else 'Unpinned'} chat {cid} ({title}).")
    return 0


def run_folders(args: argparse.Namespace) -> int:
    folders: list[tuple[Folder, int]] = []
    loose = 0
    if _db_path(args).exists():
        store = _open(args)
        try:
            counts: dict[int | None, int] = {}
            for c in store.list_conversations():
                counts[c.folder_id] = counts.get(c.folder_id, 0) + 1
            folders = [(f, counts.get(f.id, 0)) for f in store.list_folders()]
            loose = counts.get(None, 0)
        finally:
            store.close()
    if args.json:
        print(json.dumps({"folders": [{"name": f.name, "chats": n} for f, n in folders], "in_no_folder": loose},
                         ensure_ascii=False))
        return 0
    if not folders:
        print("No folders.")
    for f, n in folders:
        print(f"{n:>5} chat{'' if n == 1 else 's'}  {display_title(f.name)}")
    if folders and loose:
        print(f"{loose:>5} chat{'' if loose == 1 else 's'}  (in no folder)")
    return 0


def _find_folder(store: ChatStore, name: str) -> Folder | None:
    key = folder_key(name)
    return next((f for f in store.list_folders() if folder_key(f.name) == key), None)


def _folder(store: ChatStore, name: str) -> Folder:
    found = _find_folder(store, name)
    if found is None:
        raise ChatsError(f"No folder {name!r} (see `tailor chats folders`).")
    return found


def _create_folder(store: ChatStore, name: str) -> Folder:
    try:
        return store.create_folder(name)
    except ValueError as exc:
        raise ChatsError(str(exc)) from None


def _chat_id(store: ChatStore, ref: str) -> int:
    try:
        return find_chat_id(store, ref)
    except UnknownChatError as exc:
        raise ChatsError(str(exc)) from None


def run_export(args: argparse.Namespace) -> int:
    output: Path | None = args.output
    to_folder = output is not None and output.is_dir()  # a link to a folder counts: the user chose it
    try:
        if output is not None and not to_folder:
            check_target(output, overwrite=args.force)  # before the history is read: refused at once
        store = _open(args)
        # Images: inline in HTML, embedded in JSON when asked, else beside the file (none beside stdout).
        media_store, problems = store.media, []
        media = export_media(media_store, args.format, None if to_folder else output, embed=args.embed_media,
                             overwrite=args.force, with_files=args.with_files)
        try:
            ids = None if args.all else [_chat_id(store, args.chat)]
            if args.format == "json" and not to_folder:
                # A chat at a time from the store to the file: a large history is not held in memory.
                count = len(ids) if ids else len(store.list_conversations())
                if not count:
                    raise ChatsError("There are no chats to export.")
                _emit(output, json_chunks(iter_chats(store, ids), media), args.force)
                _said(media.problems)
                _wrote(output, count)
                return 0
            records = load_chats(store, ids)
        finally:
            store.close()
        if not records:
            raise ChatsError("There are no chats to export.")
        if to_folder:
            write_export_folder(output, records, args.format, overwrite=args.force, media_store=media_store,
                                embed_media=args.embed_media, problems=problems, with_files=args.with_files)
        else:
            _emit(output, [render(args.format, records, media)], args.force)
            problems = media.problems
    except TargetRefused as exc:
        raise ChatsError(str(exc)) from None
    _said(problems)
    _wrote(output, len(records))
    return 0


def _said(problems: list[str]) -> None:
    """An image or clip an export left out, a line each on stderr (the export itself is written)."""
    for line in problems:
        print(f"tailor: {line}", file=sys.stderr)


def _wrote(output: Path | None, count: int) -> None:
    if output is not None:
        print(f"Wrote {count} chat(s) to {output}", file=sys.stderr)


def _emit(output: Path | None, chunks: Iterable[str], force: bool) -> None:
    """Write `chunks` to `output` (None: stdout)."""
    if output is not None:
        write_export_file(output, chunks, overwrite=force)
        return
    for chunk in chunks:
        sys.stdout.write(chunk)
    sys.stdout.flush()


def run_import(args: argparse.Namespace) -> int:
    try:
        if not _db_path(args).exists():
            probe_file(args.file)  # a file that would be refused creates no history
        store = _open(args, create=True)
        try:
            result = import_file(store, args.file)  # refused before anything is written, or a chat at a time
        finally:
            store.close()
    except ChatImportError as exc:
        raise ChatsError(str(exc)) from None
    for line in (*result.problems, *result.notes):
        print(f"tailor: {line}", file=sys.stderr)
    if result.error:
        raise ChatsError(result.error)
    print(_summary(result, args.file))
    return 0


def _summary(result: ImportResult, path: Path) -> str:
    skipped = f"; {len(result.skipped)} already there, kept as they are" if result.skipped else ""
    unread = f"; {len(result.problems)} could not be read" if result.problems else ""
    mended = f"; {len(result.notes)} mended on the way in (see above)" if result.notes else ""
    origin = " (ChatGPT)" if result.source == "chatgpt" else ""
    return f"Imported {len(result.imported)} chat(s) from {path}{origin}{skipped}{unread}{mended}"

"""`tailor chats ls|rm`, `tailor export` and `tailor import`: the chat history from the command line. No Qt."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from app.services.chat_export import (
    UnknownChatError,
    display_title,
    find_chat_id,
    iso_time,
    load_chats,
    safe_filename,
    to_json,
    to_markdown,
)
from app.services.chat_export_html import to_html
from app.services.chat_import import ChatImportError, import_chats, read_export
from app.services.paths import AppPaths
from app.services.store import ChatStore

FORMATS = {"json": to_json, "md": to_markdown, "html": to_html}


class ChatsError(Exception):
    """A chat that does not exist, a file that cannot be written or imported; one line for the user."""


def add_chats_parsers(subparsers: Any) -> None:
    """Add `chats` (ls, rm), `export` and `import` to `parser.add_subparsers()`."""
    chats = subparsers.add_parser("chats", help="list or delete the chats of the history")
    _db_option(chats)
    chats.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    chats.set_defaults(func=run_ls)
    sub = chats.add_subparsers(dest="chats_command")
    ls = sub.add_parser("ls", help="list the chats, most recently updated first")
    _db_option(ls)
    ls.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ls.set_defaults(func=run_ls)
    rm = sub.add_parser("rm", help="delete a chat and its messages")
    _db_option(rm)
    rm.add_argument("chat", metavar="ID", help="the chat's number (as `tailor chats ls` shows) or its UUID")
    rm.set_defaults(func=run_rm)

    export = subparsers.add_parser("export", help="write chats as Markdown, HTML or Tailor's JSON")
    _db_option(export)
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--chat", metavar="ID", help="one chat: its number or UUID")
    which.add_argument("--all", action="store_true", help="every chat")
    export.add_argument("--format", choices=tuple(FORMATS), required=True, help="md, html or json (re-importable)")
    export.add_argument(
        "-o", "--output", type=Path, metavar="PATH",
        help="the file to write (default: stdout); an existing folder gets one file per chat",
    )
    export.set_defaults(func=run_export)

    imp = subparsers.add_parser("import", help="add the chats of a Tailor JSON export (those already there are kept)")
    _db_option(imp)
    imp.add_argument("file", type=Path, help="a file written by `tailor export --format json`")
    imp.set_defaults(func=run_import)


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
    return ChatStore(path)


def run_ls(args: argparse.Namespace) -> int:
    if not _db_path(args).exists():
        print(json.dumps({"chats": []}) if args.json else "No chats.")
        return 0
    store = _open(args)
    try:
        rows = [(c, store.conversation_uid(c.id), store.message_count(c.id)) for c in store.list_conversations()]
    finally:
        store.close()
    if args.json:
        chats = [{"number": c.id, "id": uid, "title": c.title, "messages": n, "created": c.created,
                  "updated": c.updated} for c, uid, n in rows]
        print(json.dumps({"chats": chats}, ensure_ascii=False))
        return 0
    if not rows:
        print("No chats.")
    for c, _uid, n in rows:
        print(f"{c.id:>5}  {iso_time(c.updated)}  {n:>4} messages  {display_title(c.title)}")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    store = _open(args)
    try:
        cid = _chat_id(store, args.chat)
        title = store.get_conversation(cid).title
        store.delete_conversation(cid)
    finally:
        store.close()
    print(f"Deleted chat {cid}: {title}")
    return 0


def _chat_id(store: ChatStore, ref: str) -> int:
    try:
        return find_chat_id(store, ref)
    except UnknownChatError as exc:
        raise ChatsError(str(exc)) from None


def run_export(args: argparse.Namespace) -> int:
    store = _open(args)
    try:
        records = load_chats(store, None if args.all else [_chat_id(store, args.chat)])
    finally:
        store.close()
    if not records:
        raise ChatsError("There are no chats to export.")
    render = FORMATS[args.format]
    if args.output is None:
        sys.stdout.write(render(records))
        sys.stdout.flush()
        return 0
    if args.output.is_dir():
        for record in records:
            _write(args.output / safe_filename(record.conversation.title, record.uid, args.format), render([record]))
        print(f"Wrote {len(records)} chat(s) to {args.output}", file=sys.stderr)
        return 0
    _write(args.output, render(records))
    print(f"Wrote {len(records)} chat(s) to {args.output}", file=sys.stderr)
    return 0


def _write(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (a temporary file beside it, then renamed)."""
    try:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        raise ChatsError(f"Cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp's file is private; an export is as any file the user writes
        os.replace(temp, path)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise ChatsError(f"Cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def run_import(args: argparse.Namespace) -> int:
    try:
        found = read_export(args.file)  # the whole file checked before the history is opened
    except ChatImportError as exc:
        raise ChatsError(str(exc)) from None
    store = _open(args, create=True)
    try:
        result = import_chats(store, found.chats, found.problems)
    finally:
        store.close()
    for problem in result.problems:
        print(f"tailor: {problem}", file=sys.stderr)
    skipped = f"; {len(result.skipped)} already there, kept as they are" if result.skipped else ""
    unread = f"; {len(result.problems)} could not be read" if result.problems else ""
    origin = " (ChatGPT)" if found.source == "chatgpt" else ""
    print(f"Imported {len(result.imported)} chat(s) from {args.file}{origin}{skipped}{unread}")
    return 0


"""The `tailor` command line: the same engine as the window, without Qt. Each command is a module of
its own (chat, serve, plan, pull…) that adds its parser here; no command opens the window itself."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import metadata

from app.cli.chat import CliError, add_chat_parser
from app.cli.chats import ChatsError, add_chats_parsers
from app.cli.hw import add_hw_parser
from app.cli.library import add_library_parsers
from app.cli.mcp import add_mcp_parser
from app.cli.mem import add_mem_parser
from app.cli.plan import PlanError, add_plan_parser
from app.cli.preset import PresetError, add_preset_parser
from app.cli.pull import add_pull_parser
from app.cli.search import add_search_parser
from app.cli.serve import add_serve_parser
from app.services.history.store import StoreError

OpenWindow = Callable[[list[str]], int]  # the window's own options -> exit status (app.launcher.open_gui)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tailor", description="Chat with open language models locally.")
    parser.add_argument("--version", action="version", version=f"tailor {_version()}")
    sub = parser.add_subparsers(dest="command")
    add_chat_parser(sub)
    add_hw_parser(sub)
    add_plan_parser(sub)
    add_search_parser(sub)
    add_library_parsers(sub)
    add_pull_parser(sub)
    add_serve_parser(sub)
    add_mem_parser(sub)
    add_preset_parser(sub)
    add_chats_parsers(sub)
    add_mcp_parser(sub)
    gui = sub.add_parser("gui", help="open the window (the default with no command)")
    gui.add_argument("--model", help="GGUF file to load (default: the built-in starter model)")
    gui.add_argument("--db", help="chat history file (default: in the user data folder)")
    return parser


def main(argv: list[str] | None = None, open_window: OpenWindow | None = None) -> int:
    """Run a command; `tailor gui` (and a bare `tailor --model X`) hands over to `open_window`, which the
    launcher passes in: the command line never imports Qt itself."""
    args = build_parser().parse_args(argv)
    if getattr(args, "func", None) is None:
        if open_window is None:
            print("tailor: error: the window opens from the `tailor` command", file=sys.stderr)
            return 2
        gui_args = []
        for option in ("model", "db"):
            if getattr(args, option, None):
                gui_args += [f"--{option}", str(getattr(args, option))]
        return open_window(gui_args)
    try:
        return args.func(args)
    except (CliError, PlanError, PresetError, ChatsError, StoreError) as exc:  # StoreError: the chat history
        print(f"tailor: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl+C, for every command as for `tailor chat`: one line, 130 (128 + SIGINT) as shells expect.
        # What was done stays done: an import's chats are each written whole, a pull's partial
        # download is kept and resumed by the next pull.
        print("tailor: interrupted", file=sys.stderr)
        return 130


def _version() -> str:
    try:
        return metadata.version("tailor")
    except metadata.PackageNotFoundError:
        return "0+unknown"

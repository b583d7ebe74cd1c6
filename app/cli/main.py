"""The `tailor` command line: the same engine as the window, without Qt. Each command is a module of
its own (chat, serve, plan, pull…) that adds its parser here; no command opens the window itself."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import multiprocessing
import sys
from collections.abc import Callable
from importlib import metadata

from app.cli.errors import CliError
from app.services.history.problems import StoreError

OpenWindow = Callable[[list[str]], int]  # the window's own options -> exit status (app.launcher.open_gui)


# Each command's module and the function that adds its parser (some add several commands). Only the module of
# the command being run is imported: together they take a second to import, which every run paid.
COMMANDS: dict[str, tuple[str, str]] = {
    "chat": ("app.cli.chat", "add_chat_parser"),
    "hw": ("app.cli.hw", "add_hw_parser"),
    "plan": ("app.cli.plan", "add_plan_parser"),
    "search": ("app.cli.search", "add_search_parser"),
    "ls": ("app.cli.library", "add_library_parsers"),
    "rm": ("app.cli.library", "add_library_parsers"),
    "pull": ("app.cli.pull", "add_pull_parser"),
    "serve": ("app.cli.serve", "add_serve_parser"),
    "mem": ("app.cli.mem", "add_mem_parser"),
    "ps": ("app.cli.server_models", "add_server_models_parsers"),
    "unload": ("app.cli.server_models", "add_server_models_parsers"),
    "presets": ("app.cli.preset", "add_preset_parser"),
    "chats": ("app.cli.chats", "add_chats_parsers"),
    "export": ("app.cli.chats", "add_chats_parsers"),
    "import": ("app.cli.chats", "add_chats_parsers"),
    "mcp": ("app.cli.mcp", "add_mcp_parser"),
    "index": ("app.cli.index", "add_index_parser"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` alone when it is one (the others are not imported), else of every command."""
    parser = argparse.ArgumentParser(prog="tailor", description="Chat with open language models locally.")
    parser.add_argument("--version", action="version", version=f"tailor {_version()}")
    sub = parser.add_subparsers(dest="command")
    adders = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module, adder in adders:
        getattr(importlib.import_module(module), adder)(sub)
    gui = sub.add_parser("gui", help="open the window (the default with no command)")
    gui.add_argument("--model", help="GGUF file to load (default: the built-in starter model)")
    gui.add_argument("--db", help="chat history file (default: in the user data folder)")
    return parser


def _command(argv: list[str]) -> str | None:
    """The command `argv` runs, when its first word is one (`tailor --model X` opens the window)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: list[str] | None = None, open_window: OpenWindow | None = None) -> int:
    """Run a command; `tailor gui` (and a bare `tailor --model X`) hands over to `open_window`, which the
    launcher passes in: the command line never imports Qt itself."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(_command(argv)).parse_args(argv)
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
    except (CliError, StoreError) as exc:  # each command's errors are CliErrors; StoreError: the chat history
        print(f"tailor: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl+C, for every command as for `tailor chat`: one line, 130 (128 + SIGINT) as shells expect.
        # What was done stays done: an import's chats are each written whole, a pull's partial
        # download is kept and resumed by the next pull.
        print("tailor: interrupted", file=sys.stderr)
        _end_children()
        return 130


def _end_children() -> None:
    """Kill what an interrupted command started and did not stop (an engine process Ctrl+C came while it
    started, before the command could ask it to exit): at exit, multiprocessing would wait for each, and a
    hung one (or one stopped: SIGTERM waits until it runs again) would keep the command from ever ending.

    Then every other child process still there: one Ctrl+C came for while multiprocessing was still starting
    it (spawned, not yet counted among its children) is in no list but the system's, and it holds the
    command's standard output and error open after the command ended (a stopped one, for good)."""
    for child in multiprocessing.active_children():
        child.kill()
        child.join(2.0)
    import psutil  # here, not at the top: every command would pay its import to start

    try:
        left = psutil.Process().children()
    except psutil.Error:
        return
    for child in left:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(left, timeout=2.0)


def _version() -> str:
    try:
        return metadata.version("tailor")
    except metadata.PackageNotFoundError:
        return "0+unknown"

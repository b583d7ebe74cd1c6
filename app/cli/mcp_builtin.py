"""`tailor mcp add-builtin clock|files FOLDER`: add one of Tailor's own MCP servers to the configuration; and
the hidden `tailor mcp builtin KIND`, which is that server itself, speaking MCP on stdin and stdout (how
Tailor starts it: app/mcp/builtin/launch.py). No Qt."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from app.cli.errors import CliError
from app.mcp.builtin.launch import KINDS, builtin_config, builtin_server, describe_builtin, folder_root
from app.mcp.config import ConfigError, McpConfig

ConfigOf = Callable[[argparse.Namespace], McpConfig]  # the command's configuration file (app.cli.mcp)


def add_builtin_parsers(sub: Any, config_of: ConfigOf) -> None:
    """Add `add-builtin` and the hidden `builtin` to `tailor mcp`'s subparsers."""
    kinds = ", ".join(f"{kind} ({what})" for kind, what in KINDS.items())
    add = sub.add_parser("add-builtin", help=f"add one of Tailor's own servers: {kinds}",
                         usage="tailor mcp add-builtin clock [--name NAME]\n"
                               "       tailor mcp add-builtin files FOLDER [--name NAME]")
    add.add_argument("kind", choices=list(KINDS))
    add.add_argument("folder", nargs="?", help="files: the one folder it reads")
    add.add_argument("--name", help="the server's name (default: clock, files)")
    add.add_argument("--disabled", action="store_true", help="add it switched off")
    add.set_defaults(func=lambda args: run_add_builtin(args, config_of(args)))
    serve = sub.add_parser("builtin")  # no help: Tailor runs it, a person does not
    serve.add_argument("kind", choices=list(KINDS))
    serve.add_argument("--root", help="files: the folder it reads")
    serve.set_defaults(func=run_builtin)


def run_add_builtin(args: argparse.Namespace, config: McpConfig) -> int:
    if args.kind == "files" and not args.folder:
        raise CliError("the files server reads one folder: tailor mcp add-builtin files FOLDER")
    if args.kind != "files" and args.folder:
        raise CliError(f"the {args.kind} server takes no folder")
    try:
        server = builtin_server(args.kind, folder_root(args.folder) if args.folder else None)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    name = args.name or args.kind
    try:
        config.add(builtin_config(name, server, enabled=not args.disabled))
    except ConfigError as exc:
        hint = "" if args.name else "; give it another with --name"
        raise CliError(f"{exc}{hint}") from None
    off = " (disabled)" if args.disabled else ""
    print(f"Added {name}: {describe_builtin(server)}{off}")
    return 0


def run_builtin(args: argparse.Namespace) -> int:
    """Serve one built-in on stdio until the client closes it."""
    if args.kind == "files":
        from app.mcp.builtin.files import make_server  # the MCP SDK's import: only when serving
        from app.mcp.builtin.folder import FolderError

        if not args.root:
            raise CliError("the files server needs --root, the folder it reads")
        try:
            server = make_server(args.root)
        except FolderError as exc:
            raise CliError(str(exc)) from None
    else:
        from app.mcp.builtin.clock import make_server as make_clock

        server = make_clock()
    server.run()
    return 0

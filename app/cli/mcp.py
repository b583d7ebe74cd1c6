"""`tailor mcp ls|add|add-builtin|rm|test|import`: the MCP servers models may use, from the command line. No Qt.

The configuration is Tailor's `mcp.json` (AppPaths.mcp_config; `--config FILE` for another), its env
values and headers in the keyring (app.mcp.config)."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.cli.errors import CliError
from app.cli.mcp_builtin import add_builtin_parsers
from app.mcp.builtin.launch import describe_builtin
from app.mcp.config import ConfigError, McpConfig, default_keys
from app.mcp.known_configs import APPS, locate
from app.mcp.types import ServerConfig, ServerStatus
from app.services.paths import AppPaths


def add_mcp_parser(subparsers: Any) -> None:
    """Add `mcp` (ls, add, add-builtin, rm, test, import) to `parser.add_subparsers()`."""
    mcp = subparsers.add_parser("mcp", help="the MCP servers (tools) models may use")
    mcp.add_argument("--config", type=Path, help="the configuration file (default: mcp.json in Tailor's config folder)")
    mcp.set_defaults(func=run_ls)
    # The metavar leaves out `builtin`, the built-in servers themselves, which Tailor runs (mcp_builtin.py).
    sub = mcp.add_subparsers(dest="mcp_command", parser_class=_IntermixedParser,
                             metavar="{ls,add,add-builtin,rm,test,import}")
    sub.add_parser("ls", help="list the configured servers").set_defaults(func=run_ls)
    add = sub.add_parser("add", help="add a server: NAME -- COMMAND [ARGS...], or NAME --url URL",
                         usage="tailor mcp add NAME [--env K=V]... -- COMMAND [ARGS...]\n"
                               "       tailor mcp add NAME --url URL [--header 'K: V']...")
    add.add_argument("name")
    add.add_argument("--url", help="a streamable HTTP server")
    add.add_argument("--header", action="append", default=[], help="an HTTP header 'K: V' (kept in the keyring)")
    add.add_argument("--env", action="append", default=[], help="an environment variable K=V (kept in the keyring)")
    add.add_argument("--timeout", type=float, help="seconds a call may take (default 60)")
    add.add_argument("command", nargs="*", help="after --: the program and its arguments")
    add.set_defaults(func=run_add)
    rm = sub.add_parser("rm", help="remove a server (and its secrets)")
    rm.add_argument("name")
    rm.set_defaults(func=run_rm)
    test = sub.add_parser("test", help="start a server, list its tools, stop it")
    test.add_argument("name")
    test.add_argument("--startup-timeout", type=float, default=20.0, help="seconds it may take to start (20)")
    test.set_defaults(func=run_test)
    imp = sub.add_parser("import", help="add the servers of another app: a file, or claude, lmstudio, jan")
    imp.add_argument("source")
    imp.set_defaults(func=run_import)
    add_builtin_parsers(sub, _config)


class _IntermixedParser(argparse.ArgumentParser):
    """Options may come after NAME and before `--` (`add NAME --env K=V -- npx -y pkg`): argparse's
    intermixed parsing, which plain subparsers do not use."""

    _inside = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._inside:
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


def _config(args: argparse.Namespace) -> McpConfig:
    paths = AppPaths.default()
    if args.config is not None:
        return McpConfig(args.config, default_keys(args.config.with_name("mcp-secrets.json")))
    return McpConfig(paths.mcp_config, default_keys(paths.mcp_secrets))


def _errors(lines: list[str]) -> None:
    for line in lines:
        print(f"tailor: error: {line}", file=sys.stderr)


def run_ls(args: argparse.Namespace) -> int:
    loaded = _config(args).load()
    if not loaded.servers and not loaded.errors:
        print("No MCP servers. Add one with `tailor mcp add NAME -- COMMAND ARGS` or `tailor mcp import claude`,\n"
              "or one of Tailor's own: `tailor mcp add-builtin clock`, `tailor mcp add-builtin files FOLDER`.")
    for server in loaded.servers:
        state = "enabled " if server.enabled else "disabled"
        print(f"{server.name}  {state}  {describe(server)}")
    _errors(loaded.errors)
    return 1 if loaded.errors else 0


def describe(server: ServerConfig) -> str:
    """How a server is reached, without its secrets (env values, headers, a url's query)."""
    if server.builtin:
        return describe_builtin(server.builtin)
    if server.command:
        where = "stdio: " + " ".join([server.command, *server.args])
        return where + (f" (env: {', '.join(server.env)})" if server.env else "")
    url = (server.url or "").split("?")[0]
    return f"http: {url}" + (f" (headers: {', '.join(server.headers)})" if server.headers else "")


def run_add(args: argparse.Namespace) -> int:
    command = args.command
    if bool(command) == bool(args.url):
        raise CliError("give the server a command (after --) or a --url, one of the two")
    env = dict(_pair(item, "=", "--env") for item in args.env)
    headers = dict(_pair(item, ":", "--header") for item in args.header)
    if command and headers:
        raise CliError("--header is for a --url server; a command's secrets go in --env")
    if args.url and env:
        raise CliError("--env is for a command; a --url server's secrets go in --header")
    extra = {"timeout_s": args.timeout} if args.timeout else {}
    if args.timeout is not None and args.timeout <= 0:
        raise CliError("--timeout must be a positive number of seconds")
    server = ServerConfig(args.name, command=command[0] if command else None, args=tuple(command[1:]), env=env,
                          url=args.url, headers=headers, **extra)
    config = _config(args)
    try:
        config.add(server)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    print(f"Added {args.name}: {describe(server)}" + (f"; secrets in {config.keys.where}" if env or headers else ""))
    return 0


def _pair(item: str, sep: str, option: str) -> tuple[str, str]:
    key, found, value = item.partition(sep)
    if not found or not key.strip():
        raise CliError(f"{option} takes K{sep}V" + (" (a space after : is fine)" if sep == ":" else ""))
    return key.strip(), value.strip() if sep == ":" else value


def run_rm(args: argparse.Namespace) -> int:
    config = _config(args)
    try:
        removed = config.remove(args.name)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if not removed:
        raise CliError(f"no MCP server named {args.name} in {config.file}")
    print(f"Removed {args.name}")
    return 0


def run_test(args: argparse.Namespace) -> int:
    config = _config(args)
    loaded = config.load()
    server = next((s for s in loaded.servers if s.name == args.name), None)
    if server is None:
        bad = [e for e in loaded.errors if f"mcpServers.{args.name}:" in e]
        raise CliError(bad[0] if bad else f"no MCP server named {args.name} in {config.file}")
    status, seconds = start_once(server, args.startup_timeout)
    if status.state != "ready":
        print(f"tailor: error: {server.name} failed after {seconds:.1f} s: {status.reason}", file=sys.stderr)
        if status.stderr_tail:
            print("its stderr (last lines):\n" + _indent(status.stderr_tail), file=sys.stderr)
        return 1
    off = "" if server.enabled else " (disabled: models are not offered its tools)"
    print(f"{server.name}: ready in {seconds:.2f} s, {len(status.tools)} tool(s){off}")
    for tool in status.tools:
        first = tool.description.strip().split("\n")[0] if tool.description.strip() else ""
        print(f"  {tool.name}" + (f": {first}" if first else ""))
    for line in status.left_out:
        print(f"  left out: {line}")
    return 0


def start_once(server: ServerConfig, startup_timeout_s: float) -> tuple[ServerStatus, float]:
    """Start one server, wait until it is ready or failed, stop it: (its status then, seconds to get there)."""
    settled = threading.Event()

    def on_status(status: ServerStatus) -> None:
        if status.state in ("ready", "failed"):
            settled.set()

    from app.mcp.servers import McpServers  # the MCP SDK's import (0.5 s): only `test` runs a server

    servers = McpServers([server], on_status, startup_timeout_s=startup_timeout_s)
    started = time.monotonic()
    try:
        servers.start([server.name])
        settled.wait(startup_timeout_s + 30)
        seconds = time.monotonic() - started
        (status,) = servers.statuses()
    finally:
        servers.close()
    return status, seconds


def run_import(args: argparse.Namespace) -> int:
    path = locate(args.source) if args.source in APPS else Path(args.source).expanduser()
    if not path.is_file():
        raise CliError(f"no MCP configuration at {path}")
    try:
        report = _config(args).import_from(path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    print(f"Imported {len(report.added)} server(s) from {path}" + (f": {', '.join(report.added)}" if report.added else ""))
    if report.skipped:
        print(f"Skipped (a server of that name exists already): {', '.join(report.skipped)}")
    _errors(report.errors)
    return 1 if report.errors else 0


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())

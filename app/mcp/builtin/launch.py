"""Which built-in servers there are, and how one is started: the running Tailor again, as
`tailor mcp builtin clock` or `tailor mcp builtin files --root DIR`, speaking MCP on stdio. No MCP SDK here:
`tailor mcp ls` and the configuration read this on every start."""

from __future__ import annotations

import sys
from pathlib import Path

from app.mcp.types import BuiltinServer, ServerConfig

# Each built-in's kind and what it does, in the words `tailor mcp ls` and the servers window use.
KINDS: dict[str, str] = {
    "clock": "the current time and time zones",
    "files": "reads the files of one folder, never writes",
}


def tailor_command() -> tuple[str, tuple[str, ...]]:
    """The program and first arguments that run this Tailor's command line: the bundle's own executable when
    frozen (PyInstaller), else this interpreter on app.launcher (what the `tailor` console script runs)."""
    if getattr(sys, "frozen", False):
        return sys.executable, ()
    return sys.executable, ("-m", "app.launcher")


def builtin_server(kind: str, root: str | None = None) -> BuiltinServer:
    """A built-in as an entry names it; ValueError (one line) when there is no such built-in, or the files
    server has no absolute folder (`root` is checked to exist when the server starts)."""
    if kind not in KINDS:
        raise ValueError(f"no built-in server named {kind!r} (there are {', '.join(KINDS)})")
    if kind == "files":
        if not root:
            raise ValueError("the files server needs `root`, the folder it reads")
        if not Path(root).is_absolute():
            raise ValueError(f"root must be an absolute folder, not {root!r}")
        return BuiltinServer(kind, root)
    if root is not None:
        raise ValueError(f"the {kind} server takes no `root`")
    return BuiltinServer(kind)


def folder_root(path: str | Path) -> str:
    """The folder a files server is to read, as stored: absolute, `~` expanded, links resolved; ValueError
    when it is not a folder."""
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(f"{path} is not a folder")
    return str(folder)


def builtin_config(name: str, server: BuiltinServer, **fields) -> ServerConfig:
    """The ServerConfig that runs `server` with this Tailor; `fields` are the entry's other settings
    (enabled, timeout_s, always_allow, env)."""
    command, first = tailor_command()
    args = (*first, "mcp", "builtin", server.kind, *(("--root", server.root) if server.root else ()))
    return ServerConfig(name, command=command, args=args, builtin=server, **fields)


def describe_builtin(server: BuiltinServer) -> str:
    """"built-in clock (the current time and time zones)" or "built-in files: reads /home/me/notes, never
    writes"."""
    if server.kind == "files":
        return f"built-in files: reads {server.root}, never writes"
    return f"built-in {server.kind} ({KINDS[server.kind]})"

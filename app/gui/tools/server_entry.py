"""An MCP server as the window reads and writes it: the Add form's fields made into a ServerConfig (with one
clear line for what is wrong), and a server's transport and status in words. No Qt."""

from __future__ import annotations

import shlex
from urllib.parse import urlparse

from app.mcp.builtin.launch import describe_builtin
from app.mcp.types import ServerConfig, ServerStatus

_STATES = {"starting": "starting…", "ready": "ready", "failed": "failed", "stopped": "stopped"}


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """"KEY=VALUE" lines (blank lines and lines starting with # skipped) as a dict; ValueError naming the line."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what}, line {number}: write KEY=VALUE, not {stripped[:40]!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def server_config(name: str, *, command: str = "", args: str = "", url: str = "", env: str = "",
                  headers: str = "") -> ServerConfig:
    """The Add form's fields as a ServerConfig: a command (with its arguments, split as a shell would) or a URL;
    ValueError with one line saying what is wrong."""
    name, command, url = name.strip(), command.strip(), url.strip()
    if not name:
        raise ValueError("Give the server a name.")
    if any(c.isspace() for c in name) or "__" in name:
        raise ValueError("A server's name has no spaces and no '__' (tools are named server__tool).")
    if bool(command) == bool(url):
        raise ValueError("Give either a command to run or the URL of a server, not both.")
    if url:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"The URL must start with http:// or https://, not {url[:60]!r}.")
        return ServerConfig(name, url=url, headers=parse_pairs(headers, "Headers"), env={})
    try:
        split = shlex.split(args)
    except ValueError as error:  # an unclosed quote
        raise ValueError(f"Arguments: {error}.") from None
    return ServerConfig(name, command=command, args=tuple(split), env=parse_pairs(env, "Environment"))


def transport_text(config: ServerConfig) -> str:
    """"npx -y @modelcontextprotocol/server-filesystem /tmp", the URL, or what a built-in server does."""
    if config.builtin:
        return describe_builtin(config.builtin)
    if config.url:
        return config.url
    return shlex.join([config.command or "", *config.args])


def status_text(status: ServerStatus | None) -> str:
    """"ready · 5 tools", "failed: the command was not found", "starting…", "stopped"."""
    if status is None:
        return "stopped"
    words = _STATES.get(status.state, status.state)
    if status.state == "ready":
        count = len(status.tools)
        return f"{words} · {count} tool" + ("" if count == 1 else "s")
    if status.state == "failed" and status.reason:
        return f"{words}: {status.reason}"
    return words

"""What the rest of Tailor knows of MCP servers: their configuration, their tools, their status, a call's outcome,
and `ToolServers`, the one interface the chat, the CLI and the window use (McpServers implements it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

DEFAULT_CALL_TIMEOUT_S = 60.0


@dataclass(slots=True, frozen=True)
class BuiltinServer:
    """One of Tailor's own servers (app/mcp/builtin): `kind` "clock" or "files"; `root` the one folder the
    files server reads (None for the clock)."""

    kind: str
    root: str | None = None


@dataclass(slots=True, frozen=True)
class ServerConfig:
    """One entry of `mcpServers` (Claude Desktop's, LM Studio's and Jan's shape): a command to run (stdio) or a
    `url` (streamable HTTP). `env` and `headers` hold the real values here; on disk their secrets are in the
    keyring (config.py)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S  # per call
    always_allow: tuple[str, ...] = ()  # tools the user allowed for good ("Always for this tool")
    # One of Tailor's own servers: `command` and `args` then run this Tailor (app/mcp/builtin/launch.py), and
    # the file keeps only `"builtin"` (and `"root"`), so the entry survives Tailor moving or updating.
    builtin: BuiltinServer | None = None


@dataclass(slots=True, frozen=True)
class McpTool:
    """A tool of a ready server. `name` is the server's; `qualified` the name the model is given (the same, or
    `server__name` where two enabled servers have a tool of that name)."""

    server: str
    name: str
    qualified: str
    description: str
    input_schema: Mapping[str, Any]

    def openai_tool(self) -> dict:
        """The tool as OpenAI's `tools` item (what ReplyShape.tools carries)."""
        return {"type": "function", "function": {
            "name": self.qualified, "description": self.description, "parameters": dict(self.input_schema)}}


ServerState = Literal["stopped", "starting", "ready", "failed"]


@dataclass(slots=True, frozen=True)
class ServerStatus:
    """Where a server stands. `reason`: why it failed (one line); `stderr_tail`: the last lines it wrote on
    stderr; `left_out`: tools it announced that are not offered, each with why ("bad_tool: its input schema
    is not JSON Schema")."""

    name: str
    state: ServerState
    reason: str | None = None
    stderr_tail: str = ""
    tools: tuple[McpTool, ...] = ()
    left_out: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class ToolOutcome:
    """How a call ended: `ok` with the tool's text (its content, text parts joined; other parts named), or not,
    with `text` the one line that says why (the tool's own error, a timeout, the server's exit, bad arguments,
    cancelled)."""

    ok: bool
    text: str
    seconds: float
    cancelled: bool = False


class ToolServers(Protocol):
    """The MCP servers of this run of Tailor. Callbacks come on a background thread."""

    def statuses(self) -> list[ServerStatus]:
        """Every configured server's status, in the configuration's order."""

    def start(self, names: Iterable[str]) -> None:
        """Start these servers (those not running); their statuses follow through the status callback."""

    def stop(self, names: Iterable[str] | None = None) -> None:
        """Stop these servers (None: all); no process is left behind."""

    def tools(self, names: Iterable[str]) -> list[McpTool]:
        """The tools of those of these servers that are ready, named for the model (collisions namespaced)."""

    def call(self, tool: McpTool, arguments: dict, on_done: Callable[[ToolOutcome], None]) -> Callable[[], None]:
        """Run a call (arguments checked against the tool's schema first); `on_done` gets its outcome once.
        Returns a function that cancels it (its outcome then says cancelled)."""

    def close(self) -> None:
        """Stop every server and the thread that talks to them."""

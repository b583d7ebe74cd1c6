"""One MCP server while it runs: a task on McpServers' event loop that holds the SDK's client open, from
the handshake and the tool listing to the server's exit or Tailor's stop."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from app.mcp.results import result_text
from app.mcp.stderr_tail import StderrTail
from app.mcp.transports import Watch, open_transport
from app.mcp.types import ServerConfig, ServerState

STARTUP_TIMEOUT_S = 20.0  # handshake and tool listing; npx/uvx servers download themselves on a first start
MAX_BAD_LINES = 100  # lines on stdout that are not MCP messages before the server is given up
MAX_TOOL_PAGES = 100  # a tools/list that pages without end stops there
CLIENT_INFO = types.Implementation(name="Tailor", version="1")
SDK_STDIO_LOGGER = "mcp.client.stdio"


class _DropParseErrors(logging.Filter):
    """The SDK logs a traceback for every stdout line that is not JSON-RPC; Connection counts them instead
    (MAX_BAD_LINES), so a server that floods stdout cannot flood Tailor's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


def quiet_sdk_parse_errors() -> None:
    """Install the filter once on the SDK's stdio logger (idempotent)."""
    logger = logging.getLogger(SDK_STDIO_LOGGER)
    if not any(isinstance(f, _DropParseErrors) for f in logger.filters):
        logger.addFilter(_DropParseErrors())


class Connection:
    """A server's connection, its state, and its calls. Everything here runs on McpServers' loop thread.

    Args:
        config: the server.
        on_change: called (on the loop thread) each time `state` changes.
        startup_timeout_s: how long the handshake and the tool listing may take.
        stderr_log: where to copy a stdio server's stderr, or None.
    """

    def __init__(self, config: ServerConfig, on_change: Callable[[Connection], None], *,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, stderr_log: Path | None = None):
        self.config = config
        self.state: ServerState = "starting"
        self.reason: str | None = None
        self.stderr_tail = ""
        self.tools: list[types.Tool] = []
        self._on_change = on_change
        self._startup_timeout_s = startup_timeout_s
        self._stderr_log = stderr_log
        self._scope: anyio.CancelScope | None = None  # made in run(): anyio needs a running task
        self._client: Client | None = None
        self._stopping = False
        self._bad_lines = 0

    def stop(self) -> None:
        """End the connection (its process is stopped: stdin closed, then terminated, then killed)."""
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> None:
        """The connection's whole life; returns once the server is stopped or has failed."""
        watch = Watch(anyio.Event())
        tail = StderrTail(self._stderr_log) if self.config.command else None
        reason: str | None = None
        self._on_change(self)
        self._scope = anyio.CancelScope(deadline=anyio.current_time() + self._startup_timeout_s)
        if self._stopping:
            self._scope.cancel()
        try:
            with self._scope:
                reason = await self._serve(watch, tail)
        except Exception as exc:  # noqa: BLE001 - whatever ends it, the user gets one line
            reason = self._explain(exc, watch)
        finally:
            self._client = None
            if tail is not None:
                tail.close()
                await anyio.to_thread.run_sync(tail.wait, 1.0)
                self.stderr_tail = tail.tail()
        if self._stopping:
            self._set("stopped")
        else:
            self._set("failed", reason or self._cancel_reason())

    async def call(self, name: str, arguments: dict, timeout_s: float) -> tuple[bool, str]:
        """Call a tool: (ok, text), text being the result or the one line that says why not."""
        client = self._client
        if client is None:
            return False, f"{name}: the server {self.config.name} is not running"
        try:
            result = await client.call_tool(name, arguments, read_timeout_seconds=timeout_s)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return False, f"{name} did not answer within {timeout_s:g} s"
            if exc.code == CONNECTION_CLOSED:
                return False, f"{name}: the server was stopped" if self._stopping else f"{name}: the server exited"
            return False, f"{name}: the server refused the call: {_one_line(exc.message)}"
        except Exception as exc:  # noqa: BLE001 - a result the SDK cannot read, ...
            return False, f"{name}: {_one_line(str(exc)) or type(exc).__name__}"
        text = result_text(result)
        if result.is_error:
            return False, text or f"{name} failed without saying why"
        return True, text

    async def _serve(self, watch: Watch, tail: StderrTail | None) -> str:
        transport = open_transport(self.config, watch, tail)
        async with Client(transport, cache=None, client_info=CLIENT_INFO, message_handler=self._on_message) as client:
            self.tools = await _list_tools(client)
            assert self._scope is not None
            self._scope.deadline = math.inf
            self._client = client
            self._set("ready")
            await watch.ended.wait()
            self._client = None
            return "the server exited" if self.config.command else "the server closed the connection"

    async def _on_message(self, message: Any) -> None:
        """Transport faults come here: a server that writes much else than MCP messages is given up."""
        if isinstance(message, Exception):
            self._bad_lines += 1
            if self._bad_lines >= MAX_BAD_LINES and self._scope is not None:
                self._scope.cancel()

    def _cancel_reason(self) -> str:
        if self._bad_lines >= MAX_BAD_LINES:
            return f"it wrote {self._bad_lines} lines that are not MCP messages on its stdout"
        return f"it did not start within {self._startup_timeout_s:g} s (no answer to the MCP handshake)"

    def _explain(self, exc: BaseException, watch: Watch) -> str:
        exc = _leaf(exc)
        if isinstance(exc, OSError) and not isinstance(exc, httpx2.HTTPError) and self.config.command:
            return f"cannot run {self.config.command}: {exc.strerror or exc}"
        if watch.http_error:
            return f"the server answered {watch.http_error}"
        if isinstance(exc, httpx2.HTTPError):
            return f"cannot reach {_origin(self.config.url or '')}: {_one_line(str(exc)) or type(exc).__name__}"
        if watch.ended.is_set() or (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED):
            return "the server exited before it was ready" if self.config.command else "the server closed the connection"
        if isinstance(exc, MCPError):
            return f"the server refused the handshake: {_one_line(exc.message)}"
        return f"{type(exc).__name__}: {_one_line(str(exc))}"

    def _set(self, state: ServerState, reason: str | None = None) -> None:
        self.state, self.reason = state, reason
        if state != "ready":
            self.tools = []
        self._on_change(self)


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside exception groups (anyio's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (inner or exc.exceptions)[0]
    return exc


def _origin(url: str) -> str:
    """scheme://host:port of a url: its path or query may carry a key."""
    try:
        parsed = httpx2.URL(url)
        return f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
    except Exception:  # noqa: BLE001
        return "the server"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]

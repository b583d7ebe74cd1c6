"""McpServers: the MCP servers of this run of Tailor, on one event loop in one daemon thread (ToolServers)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio

from app.mcp.calls import PendingCall
from app.mcp.connection import STARTUP_TIMEOUT_S, Connection, quiet_sdk_parse_errors
from app.mcp.naming import model_names, sanitize
from app.mcp.schema_check import arguments_problem, schema_problem, validator
from app.mcp.types import McpTool, ServerConfig, ServerStatus, ToolOutcome

log = logging.getLogger(__name__)

STOP_WAIT_S = 15.0  # the SDK's worst case is ~7 s: stdin closed (2 s), SIGTERM (2 s), SIGKILL (2 s) and flushes


class McpServers:
    """The configured MCP servers: starts and stops them, lists their tools, runs calls.

    One asyncio loop in one daemon thread talks to every server; each running server is one task holding
    the SDK's client open (app.mcp.connection). `on_status` and each call's `on_done` are called on that
    thread: hand the work to your own thread (a Qt signal, a queue) and return quickly.

    Args:
        configs: the servers, in the order statuses are listed (a repeated name: the first counts).
        on_status: gets each server's new status as it changes (on the loop thread).
        startup_timeout_s: how long a server may take to answer the handshake and list its tools.
        stderr_dir: where each stdio server's stderr is copied, as `mcp-<name>.log`; None: kept in memory only.
    """

    def __init__(self, configs: Iterable[ServerConfig], on_status: Callable[[ServerStatus], None], *,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, stderr_dir: Path | None = None):
        self._configs: dict[str, ServerConfig] = {}
        for config in configs:
            self._configs.setdefault(config.name, config)
        self._on_status = on_status
        quiet_sdk_parse_errors()
        self._startup_timeout_s = startup_timeout_s
        self._stderr_dir = stderr_dir
        self._lock = threading.Lock()
        self._statuses = {name: ServerStatus(name, "stopped") for name in self._configs}
        self._checks: dict[tuple[str, str], Any] = {}  # (server, tool) -> its arguments' validator
        self._running: dict[str, tuple[Connection, asyncio.Task]] = {}  # loop thread only
        self._calls: set[PendingCall] = set()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-servers", daemon=True)
        self._thread.start()

    def statuses(self) -> list[ServerStatus]:
        """Every configured server's status, in the configuration's order (tools under their own names)."""
        with self._lock:
            return [self._statuses[name] for name in self._configs]

    def start(self, names: Iterable[str]) -> None:
        """Start those of these servers that are not running; statuses follow through on_status."""
        for name in names:
            if name in self._configs and not self._closed:
                self._loop.call_soon_threadsafe(self._start, name)

    def stop(self, names: Iterable[str] | None = None) -> None:
        """Stop these servers (None: all) and wait until their processes are gone (not when called from the
        loop thread, from a callback: it then only asks)."""
        if self._closed:
            return
        wanted = list(self._configs) if names is None else [n for n in names if n in self._configs]
        future = asyncio.run_coroutine_threadsafe(self._stop(wanted), self._loop)
        if threading.current_thread() is not self._thread:
            try:
                future.result(timeout=STOP_WAIT_S + 5)
            except concurrent.futures.TimeoutError:
                log.warning("MCP servers %s did not stop within %s s", wanted, STOP_WAIT_S + 5)

    def configure(self, configs: Iterable[ServerConfig]) -> None:
        """The servers are these from now on (the configuration changed): a server gone or changed is stopped
        (a changed one starts again when asked), a new one is added stopped. Statuses of those are told."""
        wanted: dict[str, ServerConfig] = {}
        for config in configs:
            wanted.setdefault(config.name, config)
        with self._lock:
            old = dict(self._configs)
        self.stop([name for name, config in old.items() if not _same_launch(wanted.get(name), config)])
        with self._lock:
            self._configs = wanted
            fresh = [name for name in wanted if not _same_launch(old.get(name), wanted[name])]
            for name in fresh:
                self._statuses[name] = ServerStatus(name, "stopped")
        for name in fresh:
            self._on_status(ServerStatus(name, "stopped"))

    def tools(self, names: Iterable[str]) -> list[McpTool]:
        """The tools of those of these servers that are ready, named for the model: a name two of them share
        becomes `server__tool`."""
        wanted = set(names)
        with self._lock:
            tools = [t for name, s in self._statuses.items() if name in wanted and s.state == "ready" for t in s.tools]
        qualified = model_names([(t.server, t.name) for t in tools])
        return [dataclasses.replace(t, qualified=q) for t, q in zip(tools, qualified, strict=True)]

    def call(self, tool: McpTool, arguments: dict, on_done: Callable[[ToolOutcome], None]) -> Callable[[], None]:
        """Run a call: its arguments are checked against the tool's schema first (a mismatch never reaches
        the server); it may take the server's `timeout_s`. `on_done` gets the outcome exactly once, on the
        loop thread. Returns a function that cancels the call (from any thread; the server is told)."""
        pending = PendingCall(tool.name, on_done)
        if self._closed:
            pending.finish(False, f"{tool.name}: the MCP servers are closed")
            return lambda: None
        with self._lock:
            self._calls.add(pending)
        self._loop.call_soon_threadsafe(self._begin, pending, tool, arguments)

        def cancel() -> None:
            if not self._loop.is_closed():
                self._loop.call_soon_threadsafe(pending.cancel)

        return cancel

    def close(self) -> None:
        """Stop every server, end the pending calls, and end the loop's thread."""
        if self._closed:
            return
        self.stop(None)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        with self._lock:
            left = list(self._calls)
        for pending in left:
            pending.finish(False, f"{pending.tool}: the MCP servers were closed")
        if not self._thread.is_alive():
            self._loop.close()

    # On the loop thread from here on.

    def _start(self, name: str) -> None:
        if name in self._running or self._closed:
            return
        log_file = self._stderr_dir / f"mcp-{sanitize(name)}.log" if self._stderr_dir else None
        conn = Connection(self._configs[name], self._changed, startup_timeout_s=self._startup_timeout_s,
                          stderr_log=log_file)
        task = self._loop.create_task(conn.run())
        self._running[name] = (conn, task)
        task.add_done_callback(lambda t: self._ended(name, t))

    def _ended(self, name: str, task: asyncio.Task) -> None:
        if self._running.get(name, (None, None))[1] is task:
            del self._running[name]
        if not task.cancelled() and task.exception() is not None:
            log.error("MCP server %s: its connection ended with %r", name, task.exception())

    async def _stop(self, names: list[str]) -> None:
        tasks = []
        for name in names:
            if name in self._running:
                conn, task = self._running[name]
                conn.stop()
                tasks.append(task)
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT_S)

    def _changed(self, conn: Connection) -> None:
        name = conn.config.name
        tools, left_out, checks = _offered_tools(conn)
        status = ServerStatus(name, conn.state, conn.reason, conn.stderr_tail, tuple(tools), tuple(left_out))
        with self._lock:
            self._statuses[name] = status
            self._checks = {k: v for k, v in self._checks.items() if k[0] != name} | checks
        try:
            self._on_status(status)
        except Exception:  # noqa: BLE001 - a listener's bug must not stop the servers
            log.exception("the MCP status listener failed on %s", name)

    def _begin(self, pending: PendingCall, tool: McpTool, arguments: dict) -> None:
        task = self._loop.create_task(self._run_call(pending, tool, arguments))
        task.add_done_callback(lambda t: self._call_done(pending, t))

    async def _run_call(self, pending: PendingCall, tool: McpTool, arguments: dict) -> None:
        pending.scope = anyio.CancelScope()
        if pending.cancel_requested:
            pending.scope.cancel()
        with pending.scope:
            with self._lock:
                check = self._checks.get((tool.server, tool.name))
            running = self._running.get(tool.server)
            if running is None or running[0].state != "ready" or check is None:
                pending.finish(False, f"{tool.name}: the server {tool.server} is not running")
                return
            problem = arguments_problem(check, tool.name, arguments)
            if problem:
                pending.finish(False, problem)
                return
            ok, text = await running[0].call(tool.name, arguments, self._configs[tool.server].timeout_s)
            pending.finish(ok, text)
        if pending.scope.cancelled_caught:
            pending.finish_cancelled()

    def _call_done(self, pending: PendingCall, task: asyncio.Task) -> None:
        with self._lock:
            self._calls.discard(pending)
        if task.cancelled():
            pending.finish_cancelled()
        elif task.exception() is not None:
            pending.finish(False, f"{pending.tool}: {task.exception()!r}")
        pending.finish(False, f"{pending.tool}: ended without an outcome")  # never: every path above finishes


def _same_launch(a: ServerConfig | None, b: ServerConfig | None) -> bool:
    """Whether two configurations run the same server (the tools allowed for good do not change that)."""
    if a is None or b is None:
        return a is b
    return dataclasses.replace(a, always_allow=()) == dataclasses.replace(b, always_allow=())


def _offered_tools(conn: Connection) -> tuple[list[McpTool], list[str], dict[tuple[str, str], Any]]:
    """The tools of a server that can be offered, those that cannot (with why), their validators."""
    server = conn.config.name
    tools, left_out, checks, seen = [], [], {}, set()
    problems: dict[str, str | None] = {}  # by schema text: a server's tools often share one schema
    for tool in conn.tools:
        key = json.dumps(tool.input_schema, sort_keys=True, default=str)
        if key not in problems:
            problems[key] = schema_problem(tool.input_schema)
        if tool.name in seen:
            left_out.append(f"{tool.name}: announced twice")
        elif problems[key]:
            left_out.append(f"{tool.name}: {problems[key]}")
        else:
            seen.add(tool.name)
            tools.append(McpTool(server, tool.name, sanitize(tool.name), tool.description or "", tool.input_schema))
            checks[(server, tool.name)] = validator(tool.input_schema)
    return tools, left_out, checks

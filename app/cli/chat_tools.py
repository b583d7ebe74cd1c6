"""`tailor chat --mcp NAME[,NAME]`: the model may call the tools of those MCP servers.

Each call is allowed by `--allow TOOL` (the tool's name, or `server/tool`), `--allow-all`, or the
server's "Always for this tool" list; otherwise the terminal asks (when stdin and stderr are one),
and without a terminal the call is denied and the model is told so. Calls of one step run
concurrently; Ctrl+C cancels them and ends the command (130). What each call did goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from app.chat.tool_rounds import CANCELLED, DENIED, chat_key
from app.chat.tool_set import ToolSet, fit_tools
from app.mcp.config import McpConfig, default_keys
from app.mcp.types import McpTool, ServerConfig, ServerStatus, ToolOutcome, ToolServers
from app.services.history.tool_steps import ToolCallRecord, ToolStep
from app.services.paths import AppPaths
from engine.protocol import Done, ModelInfo, ReplyShape

SERVER_START_TIMEOUT_S = 60.0


def add_tool_arguments(chat: argparse.ArgumentParser) -> None:
    chat.add_argument(
        "--mcp", metavar="NAME[,NAME]",
        help="let the model call the tools of these MCP servers (`tailor mcp ls` lists them)",
    )
    chat.add_argument(
        "--allow", action="append", default=[], metavar="TOOL",
        help="with --mcp: run this tool (its name, or server/tool) without asking; repeatable",
    )
    chat.add_argument("--allow-all", action="store_true", help="with --mcp: run every call without asking")
    chat.add_argument(
        "--tool-choice", default="auto", metavar="auto|required|NAME",
        help="with --mcp: the first answer must call a tool (required) or this tool; later ones choose (auto)",
    )
    chat.add_argument(
        "--tool-steps", type=int, default=10, metavar="N",
        help="with --mcp: the most tool steps in the reply (%(default)s)",
    )


def server_names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


@dataclass(slots=True)
class TerminalPermissions:
    """Whether a call may run: the flags, the server's always-allow list, else the terminal's answer."""

    allowed: set[str]  # --allow (tool names or server/tool) and what the terminal allowed for this run
    allow_all: bool
    is_allowed_for_good: Callable[[str, str], bool]
    allow_for_good: Callable[[str, str], None]
    ask: Callable[[str], str] | None  # a prompt → the answer; None: no terminal
    denied_without_terminal: list[str] = field(default_factory=list)

    def permits(self, call: ToolCallRecord, tool: McpTool) -> bool:
        if self.allow_all or tool.name in self.allowed or chat_key(tool) in self.allowed or tool.qualified in self.allowed:
            return True
        if self.is_allowed_for_good(tool.server, tool.name):
            return True
        if self.ask is None:
            self.denied_without_terminal.append(tool.qualified)
            return False
        return self._asked(call, tool)

    def _asked(self, call: ToolCallRecord, tool: McpTool) -> bool:
        arguments = _pretty(call.arguments)
        prompt = (f"\ntailor: {tool.qualified} (server {tool.server}) wants to run with:\n{arguments}\n"
                  "Allow? [y] once, [c] for this chat, [a] always for this tool, [n] deny: ")
        while True:
            answer = self.ask(prompt).strip().lower()[:1] or "y"
            if answer in ("y", "o"):
                return True
            if answer == "c":
                self.allowed.add(chat_key(tool))
                return True
            if answer == "a":
                self.allow_for_good(tool.server, tool.name)
                return True
            if answer in ("n", "d"):
                return False


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), indent=2, ensure_ascii=False)
    except json.JSONDecodeError:
        return arguments


def wait_for_servers(servers: ToolServers, names: list[str], statuses: queue.Queue[ServerStatus]) -> None:
    """Start the servers and wait until each is ready or failed; a failed one is said on stderr."""
    servers.start(names)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        now = {s.name: s for s in servers.statuses() if s.name in names}
        if all(s.state in ("ready", "failed") for s in now.values()):
            break
        try:
            statuses.get(timeout=0.2)
        except queue.Empty:
            pass
    for status in servers.statuses():
        if status.name in names and status.state != "ready":
            tail = f"\n{status.stderr_tail.rstrip()}" if status.stderr_tail.strip() else ""
            print(f"tailor: MCP server {status.name} is not ready ({status.state}: {status.reason}){tail}",
                  file=sys.stderr)


def offered_tools(servers: ToolServers, names: list[str], n_ctx: int) -> ToolSet | None:
    tools = fit_tools(servers.tools(names), n_ctx)
    if tools is not None and tools.left_out:
        print(f"tailor: {tools.summary()}", file=sys.stderr)
    return tools


def run_step(servers: ToolServers, tools: ToolSet, event: Done, permissions: TerminalPermissions) -> ToolStep:
    """Run the calls of `event` (those permitted, concurrently) and the step with their outcomes.

    Raises:
        KeyboardInterrupt: Ctrl+C; the running calls were cancelled.
    """
    calls = [ToolCallRecord(c.id, c.name, c.arguments, server=_server(tools, c.name)) for c in event.tool_calls]
    outcomes: queue.Queue[tuple[str, ToolOutcome]] = queue.Queue()
    cancels: dict[str, Callable[[], None]] = {}
    ended: dict[str, ToolCallRecord] = {}
    for call in calls:
        tool = tools.by_name.get(call.name)
        if tool is None:
            ended[call.id] = call.ended("failed", f"There is no tool named {call.name!r}.")
        elif not permissions.permits(call, tool):
            ended[call.id] = call.ended("denied", DENIED)
        else:
            ended.update(_started(servers, tool, call, outcomes, cancels))
    try:
        while len(ended) < len(calls):
            call_id, outcome = outcomes.get()
            ended[call_id] = _ended(next(c for c in calls if c.id == call_id), outcome)
    except KeyboardInterrupt:
        for cancel in cancels.values():
            cancel()
        raise
    step = ToolStep(event.text, tuple(ended[c.id] for c in calls), event.reasoning)
    for call in step.calls:
        print(f"tailor: {call_line(call)}", file=sys.stderr)
    return step


def _started(servers: ToolServers, tool: McpTool, call: ToolCallRecord, outcomes: queue.Queue,
             cancels: dict[str, Callable[[], None]]) -> dict[str, ToolCallRecord]:
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return {call.id: call.ended("failed", f"Error: the arguments are not JSON ({exc.msg}).")}
    if not isinstance(arguments, dict):
        return {call.id: call.ended("failed", "Error: the arguments are not a JSON object.")}
    cancels[call.id] = servers.call(tool, arguments, lambda outcome, i=call.id: outcomes.put((i, outcome)))
    return {}


def _ended(call: ToolCallRecord, outcome: ToolOutcome) -> ToolCallRecord:
    if outcome.cancelled:
        return call.ended("cancelled", CANCELLED, outcome.seconds)
    if outcome.ok:
        return call.ended("ok", outcome.text, outcome.seconds)
    return call.ended("failed", f"Error: {outcome.text}", outcome.seconds)


def _server(tools: ToolSet, name: str) -> str:
    tool = tools.by_name.get(name)
    return tool.server if tool else ""


def call_line(call: ToolCallRecord) -> str:
    """One line for a call that ended: "called read_file (files) · ok · 0.4 s · 2.1 kB"."""
    where = f" ({call.server})" if call.server else ""
    size = len(call.result.encode("utf-8"))
    figures = f" · {call.seconds:.1f} s · {size / 1000:.1f} kB" if call.status in ("ok", "failed") else ""
    line = f"called {call.name}{where} · {call.status}{figures}"
    if call.status == "failed":
        line += f": {call.result.removeprefix('Error: ').splitlines()[0][:200] if call.result else ''}"
    return line


class CliTools:
    """The MCP servers of one `tailor chat --mcp`, the tools offered, and the permissions of this run."""

    def __init__(self, servers: ToolServers, tools: ToolSet, permissions: TerminalPermissions, tool_choice: str,
                 cap: int):
        self.servers, self.tools, self.permissions = servers, tools, permissions
        self.tool_choice, self.cap = tool_choice, cap
        self.steps = 0

    @classmethod
    @contextmanager
    def opened(cls, args: argparse.Namespace, paths: AppPaths, info: ModelInfo,
               error: type[Exception]) -> Iterator[CliTools | None]:
        """The tools of `--mcp`'s servers (None without --mcp), stopped after; `error` for what cannot be."""
        names = server_names(args.mcp)
        if not names:
            yield None
            return
        if info.tool_format is None:
            raise error(f"--mcp: {info.name}'s chat template takes no tools")
        config = McpConfig(paths.mcp_config, default_keys(paths.mcp_secrets))
        configs = _chosen(config, names, error)
        from app.mcp.servers import McpServers  # the MCP SDK's import (0.5 s), only with --mcp

        statuses: queue.Queue[ServerStatus] = queue.Queue()
        servers = McpServers(configs, on_status=statuses.put, stderr_dir=paths.log_dir)
        try:
            wait_for_servers(servers, names, statuses)
            tools = offered_tools(servers, names, info.n_ctx)
            if tools is None:
                raise error(f"--mcp {args.mcp}: no tools to offer (no server is ready, or none of its tools fits)")
            if args.tool_choice not in ("auto", "required", "none") and args.tool_choice not in tools.by_name:
                raise error(f"--tool-choice {args.tool_choice}: no such tool (the tools: {', '.join(tools.by_name)})")
            always = {(c.name, tool) for c in configs for tool in c.always_allow}

            def allow_for_good(server: str, tool: str) -> None:
                always.add((server, tool))
                config.allow_tool(server, tool)

            permissions = TerminalPermissions(set(args.allow), args.allow_all, lambda s, t: (s, t) in always,
                                              allow_for_good, _terminal())
            yield cls(servers, tools, permissions, args.tool_choice, args.tool_steps)
        finally:
            servers.close()

    def shaped(self, shape: ReplyShape) -> ReplyShape:
        return replace(shape, tools=self.tools.tools_json, tool_choice=self.tool_choice)

    def takes(self, event: Done) -> bool:
        return event.finish_reason == "tool_calls" and bool(event.tool_calls)

    def run_step(self, event: Done) -> ToolStep | None:
        """Run the calls of `event`; None when the reply reached its cap of steps (said on stderr)."""
        self.steps += 1
        if self.steps > self.cap:
            print(f"\ntailor: the reply reached its cap of {self.cap} tool steps (--tool-steps); the calls it made "
                  "last were not run", file=sys.stderr)
            return None
        if event.text:  # what the model said before its calls ends its line
            sys.stdout.write("\n")
        step = run_step(self.servers, self.tools, event, self.permissions)
        denied, self.permissions.denied_without_terminal = self.permissions.denied_without_terminal, []
        for name in denied:
            print(f"tailor: denied {name}: there is no terminal to ask; allow it with --allow {name} or --allow-all",
                  file=sys.stderr)
        return step


def _chosen(config: McpConfig, names: list[str], error: type[Exception]) -> list[ServerConfig]:
    loaded = config.load()
    for line in loaded.errors:
        print(f"tailor: {line}", file=sys.stderr)
    known = {c.name: c for c in loaded.servers}
    missing = [n for n in names if n not in known]
    if missing:
        raise error(f"--mcp: no MCP server named {', '.join(missing)} in {config.file} (see `tailor mcp ls`)")
    return [known[n] for n in names]


def _terminal() -> Callable[[str], str] | None:
    """How to ask the user, when stdin and stderr are a terminal."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None

    def ask(prompt: str) -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        return sys.stdin.readline()

    return ask

"""ToolRound: the calls of one tool step of a reply, asked about, run and answered, on the session's thread.

A reply that calls tools pauses; each call runs at once when its tool is allowed already (for good, or
in this chat), else the user is asked, one call at a time, while the allowed ones run. Calls run
concurrently on the MCP servers' thread; their outcomes come back to the session's thread as
`ToolFinished` events (through `deliver`, the way engine events come), so everything here runs on one
thread. When every call has ended the round calls `on_done` with the step as it ended, and the reply
goes on with the results as tool turns.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from app.chat.tool_permissions import Decision, PermissionAsk
from app.mcp.types import McpTool, ToolOutcome, ToolServers
from app.services.history.tool_steps import ToolCallRecord, ToolStep

DENIED = "The user denied this call."
CANCELLED = "The call was cancelled by the user."


@dataclass(slots=True, frozen=True)
class ToolFinished:
    """A call's outcome, brought to the session's thread: the round it belongs to (a stale one is dropped)."""

    round_id: int
    call_id: str
    outcome: ToolOutcome


@dataclass(slots=True)
class ToolHost:
    """What a session needs to run tools.

    Args:
        servers: the MCP servers.
        deliver: brings an event onto the session's thread (to `ChatSession.handle`), from any thread.
        allow_for_good: keeps "Always for this tool" (server name, tool name) in the MCP configuration.
        is_allowed_for_good: whether (server name, tool name) was allowed for good.
    """

    servers: ToolServers
    deliver: Callable[[object], None]
    allow_for_good: Callable[[str, str], None]
    is_allowed_for_good: Callable[[str, str], bool]


def chat_key(tool: McpTool) -> str:
    """How a chat's `allowed_tools` names a tool."""
    return f"{tool.server}/{tool.name}"


class ToolRound:
    """The calls of one step.

    Args:
        host: the servers, and how outcomes come back.
        step: the step, its calls pending.
        tools: the request's tools by the name the model was given.
        allowed_in_chat: the chat's `allowed_tools` (chat_key names).
        on_change: told each time a call changes (it runs or ended).
        on_ask: told of the question that stands (None: none now).
        on_done: told once, with the step, when every call has ended.
        round_id: tells this round's outcomes from a stopped one's.
        where: (conversation id, message id) of the reply, for the questions.
    """

    def __init__(self, host: ToolHost, step: ToolStep, tools: Mapping[str, McpTool], allowed_in_chat: set[str],
                 on_change: Callable[[ToolCallRecord], None], on_ask: Callable[[PermissionAsk | None], None],
                 on_done: Callable[[ToolStep], None], round_id: int, where: tuple[int, int]):
        self.id = round_id
        self.host, self.tools, self.allowed_in_chat = host, tools, allowed_in_chat
        self.step = step
        self._on_change, self._on_ask, self._on_done = on_change, on_ask, on_done
        self._where = where
        self._asks: deque[str] = deque()
        self._cancels: dict[str, Callable[[], None]] = {}
        self._started: dict[str, float] = {}
        self.over = False

    # ------------------------------------------------------------ starting

    def start(self) -> None:
        """Run what is allowed, fail what cannot run, ask about the rest (the first question shows)."""
        for call in self.step.calls:
            tool = self.tools.get(call.name)
            if tool is None:
                self._end(call, "failed", f"There is no tool named {call.name!r}.")
            elif self._allowed(tool):
                self._run(call, tool)
            else:
                self._asks.append(call.id)
        self._next_question()
        self._maybe_done()

    def _allowed(self, tool: McpTool) -> bool:
        return chat_key(tool) in self.allowed_in_chat or self.host.is_allowed_for_good(tool.server, tool.name)

    def _run(self, call: ToolCallRecord, tool: McpTool) -> None:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            self._end(call, "failed", f"The arguments are not JSON ({exc.msg}).")
            return
        if not isinstance(arguments, dict):
            self._end(call, "failed", "The arguments are not a JSON object.")
            return
        self._set(call.ended("running", ""))
        self._started[call.id] = time.monotonic()
        round_id, call_id, deliver = self.id, call.id, self.host.deliver
        self._cancels[call.id] = self.host.servers.call(
            tool, arguments, lambda outcome: deliver(ToolFinished(round_id, call_id, outcome)))

    # ------------------------------------------------------------ the user's answers

    @property
    def asking(self) -> PermissionAsk | None:
        """The question that stands, if any."""
        if self.over or not self._asks:
            return None
        call = self._call(self._asks[0])
        tool = self.tools[call.name]
        return PermissionAsk(call, tool.description, *self._where)

    def answer(self, call_id: str, decision: Decision) -> None:
        """The user's answer about a call; "chat" and "tool" also answer the other questions about that tool."""
        if self.over or call_id not in self._asks:
            return
        call = self._call(call_id)
        tool = self.tools[call.name]
        if decision == "deny":
            self._asks.remove(call_id)
            self._end(call, "denied", DENIED)
        else:
            if decision == "chat":
                self.allowed_in_chat.add(chat_key(tool))
            elif decision == "tool":
                self.host.allow_for_good(tool.server, tool.name)
            ids = [call_id] if decision == "once" else [i for i in self._asks if self._call(i).name == call.name]
            for i in ids:
                self._asks.remove(i)
                self._run(self._call(i), tool)
        self._next_question()
        self._maybe_done()

    def _next_question(self) -> None:
        self._on_ask(self.asking)

    # ------------------------------------------------------------ outcomes

    def on_finished(self, event: ToolFinished) -> None:
        """A call's outcome (on the session's thread)."""
        if self.over or event.round_id != self.id or event.call_id not in self._cancels:
            return
        del self._cancels[event.call_id]
        call, outcome = self._call(event.call_id), event.outcome
        seconds = outcome.seconds or time.monotonic() - self._started.get(event.call_id, time.monotonic())
        if outcome.cancelled:
            self._end(call, "cancelled", CANCELLED, seconds)
        else:
            self._end(call, "ok" if outcome.ok else "failed", outcome.text if outcome.ok else f"Error: {outcome.text}",
                      seconds)
        self._maybe_done()

    def cancel(self) -> ToolStep:
        """Stop: running calls are cancelled, waiting ones too; nothing is told after. The step as it ended."""
        if not self.over:
            self.over = True
            for cancel in self._cancels.values():
                cancel()
            now = time.monotonic()
            for call in self.step.calls:
                if not call.finished:
                    self._set(call.ended("cancelled", CANCELLED, now - self._started.get(call.id, now)), tell=False)
            self._cancels.clear()
            self._asks.clear()
        return self.step

    # ------------------------------------------------------------ the books

    def _call(self, call_id: str) -> ToolCallRecord:
        return next(c for c in self.step.calls if c.id == call_id)

    def _end(self, call: ToolCallRecord, status: str, result: str, seconds: float = 0.0) -> None:
        self._set(call.ended(status, result, round(seconds, 3)))  # type: ignore[arg-type]

    def _set(self, call: ToolCallRecord, tell: bool = True) -> None:
        self.step = self.step.with_call(call)
        if tell:
            self._on_change(call)

    def _maybe_done(self) -> None:
        if not self.over and all(c.finished for c in self.step.calls):
            self.over = True
            self._on_ask(None)
            self._on_done(self.step)


def skipped(step: ToolStep, why: str) -> ToolStep:
    """The step with none of its calls run (the reply's step cap came first): each says `why`."""
    return replace(step, calls=tuple(c.ended("skipped", why) for c in step.calls))

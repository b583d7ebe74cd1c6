"""A reply's tool steps: what the model said before it called tools, the calls, and what they answered.

A reply that calls tools is one message in the history and on screen: its steps come first (each the
text the model wrote, then its calls with their results), its `content` is what it wrote after the
last step. Sent back to the model, each step becomes an assistant turn with its `tool_calls` and one
tool turn per call (engine_messages in app/chat/engine_history.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

# pending: shown, waiting for permission; running: permitted, the tool runs; ok / failed: it answered
# (failed: the server or the call failed, `result` says how); denied: the user (or a missing --allow)
# refused it; cancelled: Stop came first; skipped: not run (the reply's step cap came first).
CallStatus = Literal["pending", "running", "ok", "failed", "denied", "cancelled", "skipped"]
CALL_STATUSES: tuple[str, ...] = ("pending", "running", "ok", "failed", "denied", "cancelled", "skipped")
FINAL_STATUSES = frozenset({"ok", "failed", "denied", "cancelled", "skipped"})


@dataclass(slots=True, frozen=True)
class ToolCallRecord:
    """One call of a tool in a reply, and how it ended.

    `name` is the name the model called (the one it was given: a tool's own name, or
    `server__tool` where two servers have a tool of that name); `server` the MCP server that
    has it ("" when no enabled server has it); `arguments` the JSON text the model wrote.
    `result` is what goes back to the model as the tool turn: the tool's text, or one line
    saying why there is none.
    """

    id: str
    name: str
    arguments: str
    server: str = ""
    status: CallStatus = "pending"
    result: str = ""
    seconds: float = 0.0

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    def ended(self, status: CallStatus, result: str, seconds: float = 0.0) -> ToolCallRecord:
        return replace(self, status=status, result=result, seconds=seconds)

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "server": self.server,
                "status": self.status, "result": self.result, "seconds": self.seconds}


@dataclass(slots=True, frozen=True)
class ToolStep:
    """What the model wrote (and thought) before it called tools, and those calls, in its order."""

    text: str
    calls: tuple[ToolCallRecord, ...]
    reasoning: str = ""

    def to_dict(self) -> dict:
        return {"text": self.text, "reasoning": self.reasoning, "calls": [c.to_dict() for c in self.calls]}

    def with_call(self, call: ToolCallRecord) -> ToolStep:
        """This step with `call` replacing the one of its id."""
        return replace(self, calls=tuple(call if c.id == call.id else c for c in self.calls))

"""A reply's tool steps: what the model said before it called tools, the calls, and what they answered.

A reply that calls tools is one message in the history and on screen: its steps come first (each the
text the model wrote, then its calls with their results), its `content` is what it wrote after the
last step. Sent back to the model, each step becomes an assistant turn with its `tool_calls` and one
tool turn per call (engine_messages in app/chat/engine_history.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Literal

# pending: shown, waiting for permission; running: permitted, the tool runs; ok / failed: it answered
# (failed: the server or the call failed, `result` says how); denied: the user (or a missing --allow)
# refused it; cancelled: Stop came first; skipped: not run (the reply's step cap came first).
CallStatus = Literal["pending", "running", "ok", "failed", "denied", "cancelled", "skipped"]
CALL_STATUSES: tuple[str, ...] = ("pending", "running", "ok", "failed", "denied", "cancelled", "skipped")
FINAL_STATUSES = frozenset({"ok", "failed", "denied", "cancelled", "skipped"})

# Bounds on steps read from a file (an import, the history itself): a reply has at most MAX_CALLS calls
# in all its steps, ten times the most steps a chat allows (settings_fields.TOOL_STEP_CAP_RANGE), so
# that parallel calls fit; a call's id, name and server are one short line each (MCP names a tool in at
# most 128 characters). Texts, arguments and results are bounded as a message's content is: by the file.
MAX_CALLS = 1000
NAME_LIMIT = 256
MAX_SECONDS = 1e6


class ToolStepsError(ValueError):
    """Steps that cannot be read; the message names the step, the call and the field, in one line."""


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

    @classmethod
    def from_dict(cls, data: object, where: str = "call") -> ToolCallRecord:
        """The call `to_dict` wrote, each field checked (server, status, result and seconds may be left out);
        ToolStepsError names the field after `where` otherwise."""
        if not isinstance(data, dict):
            raise ToolStepsError(f"{where} must be an object, not {type(data).__name__}")
        names = {key: _text(data, key, where, NAME_LIMIT) for key in ("id", "name")}
        status = data.get("status", "pending")
        if status not in CALL_STATUSES:
            raise ToolStepsError(f'{where}: "status" must be one of {", ".join(CALL_STATUSES)}, not {_shown(status)}')
        seconds = data.get("seconds", 0.0)
        if not (isinstance(seconds, int | float) and not isinstance(seconds, bool) and _finite(seconds)
                and 0 <= seconds <= MAX_SECONDS):
            raise ToolStepsError(f'{where}: "seconds" must be a number from 0 to {MAX_SECONDS:.0f}, not {_shown(seconds)}')
        return cls(names["id"], names["name"], _text(data, "arguments", where), _text(data, "server", where, NAME_LIMIT, ""),
                   status, _text(data, "result", where, default=""), float(seconds))


@dataclass(slots=True, frozen=True)
class ToolStep:
    """What the model wrote (and thought) before it called tools, and those calls, in its order."""

    text: str
    calls: tuple[ToolCallRecord, ...]
    reasoning: str = ""

    def to_dict(self) -> dict:
        return {"text": self.text, "reasoning": self.reasoning, "calls": [c.to_dict() for c in self.calls]}

    @classmethod
    def from_dict(cls, data: object, where: str = "step") -> ToolStep:
        """The step `to_dict` wrote (reasoning may be left out), with at least one call; ToolStepsError
        names the field after `where` otherwise."""
        if not isinstance(data, dict):
            raise ToolStepsError(f"{where} must be an object, not {type(data).__name__}")
        calls = data.get("calls")
        if not isinstance(calls, list) or not calls:
            raise ToolStepsError(f'{where}: "calls" must be a list of one call or more')
        return cls(_text(data, "text", where), tuple(ToolCallRecord.from_dict(c, f"{where}, call {i + 1}")
                                                      for i, c in enumerate(calls)),
                   _text(data, "reasoning", where, default=""))

    def with_call(self, call: ToolCallRecord) -> ToolStep:
        """This step with `call` replacing the one of its id."""
        return replace(self, calls=tuple(call if c.id == call.id else c for c in self.calls))


def unfinished_ended(steps: tuple[ToolStep, ...], result: str) -> tuple[ToolStep, ...]:
    """`steps` with every call that had not ended (pending, running) cancelled, `result` saying why."""
    return tuple(replace(step, calls=tuple(c if c.finished else c.ended("cancelled", result) for c in step.calls))
                 for step in steps)


def steps_from_data(data: object) -> tuple[ToolStep, ...]:
    """A reply's steps from the JSON list `steps_to_json` wrote, each checked; ToolStepsError says what is
    wrong (and where) in one line. More than MAX_CALLS calls is refused before any is read."""
    if not isinstance(data, list):
        raise ToolStepsError(f"the tool steps must be a list, not {type(data).__name__}")
    calls = sum(len(s["calls"]) for s in data if isinstance(s, dict) and isinstance(s.get("calls"), list))
    if calls > MAX_CALLS:
        raise ToolStepsError(f"{calls:,} tool calls in one reply (at most {MAX_CALLS:,} are read)")
    return tuple(ToolStep.from_dict(step, f"step {i + 1}") for i, step in enumerate(data))


def steps_from_json(text: str) -> tuple[ToolStep, ...]:
    """A reply's steps from the history's column ('' for none); ToolStepsError when it cannot be read."""
    if not text:
        return ()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ToolStepsError("the tool steps are not JSON") from None
    return steps_from_data(data)


def steps_to_json(steps: tuple[ToolStep, ...]) -> str:
    """What the history's column holds: the steps as a JSON list, '' for none."""
    return json.dumps([s.to_dict() for s in steps], ensure_ascii=False) if steps else ""


def _text(data: dict, key: str, where: str, limit: int | None = None, default: str | None = None) -> str:
    """`data[key]`, a string (of at most `limit` characters), or `default` when left out and there is one."""
    if key not in data and default is not None:
        return default
    if key not in data:
        raise ToolStepsError(f'{where}: "{key}" is missing')
    value = data[key]
    if not isinstance(value, str):
        raise ToolStepsError(f'{where}: "{key}" must be text, not {_shown(value)}')
    if limit is not None and len(value) > limit:
        raise ToolStepsError(f'{where}: "{key}" is {len(value):,} characters long (at most {limit} are read)')
    return value


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _shown(value: object) -> str:
    """A refused value in a line: short, its type when it is not a short string or number."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a text of {len(value):,} characters"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        text = str(value)
        return text if len(text) <= 40 else f"a {len(text)}-digit number"
    return {list: "a list", dict: "an object"}.get(type(value), type(value).__name__)

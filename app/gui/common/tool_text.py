"""What the window says of tool calls: a transcript card's header words, arguments pretty-printed (the cards and
the permission question show them), and a reply copied with its steps. No Qt: the transcript's tool cards and
app/gui/tools show these, the copy actions put them on the clipboard, the tests read them.
"""

from __future__ import annotations

import json

from app.chat.reasoning_text import copy_text
from app.services.history.store import Message
from app.services.history.tool_steps import ToolCallRecord, ToolStep

REASON_CHARS = 80  # a failure's reason in a header, at most


def duration_text(seconds: float) -> str:
    """"0.4 s", "12 s"; "<0.1 s" for what took no time to speak of."""
    if seconds < 0.05:
        return "<0.1 s"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def size_text(text: str) -> str:
    """The size of a result as it went back to the model: "812 B", "2.1 kB", "3.4 MB" (UTF-8 bytes)."""
    size = len(text.encode("utf-8", "replace"))
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    """The first non-blank line of `text`, cut to `limit` characters with an ellipsis."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def status_words(call: ToolCallRecord, running_s: float | None = None) -> str:
    """What a card's header says after the tool's name: its figures when it answered, else where it stands."""
    status, why = call.status, one_line(call.result)
    if status == "ok":
        return " · ".join(part for part in (duration_text(call.seconds), size_text(call.result) if call.result else "")
                          if part)
    if status == "pending":
        return "Waiting for permission…"
    if status == "running":
        return f"Running… {int(running_s or 0)} s"
    if status in ("failed", "skipped"):
        word = "Failed" if status == "failed" else "Skipped"
        return f"{word}: {why}" if why else word
    return {"denied": "Denied", "cancelled": "Cancelled"}.get(status, status)


def call_verb(call: ToolCallRecord) -> str:
    """"Called " before the name of a call that ran to an answer (or a failure); nothing before the others."""
    return "Called " if call.status in ("ok", "failed") else ""


def pretty_arguments(arguments: str) -> str:
    """The arguments as the model wrote them, indented when they are JSON (else as they are: the model may
    have written broken JSON, which is worth seeing as it is)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    return json.dumps(value, indent=2, ensure_ascii=False)


def call_copy_text(call: ToolCallRecord) -> str:
    """One call as the clipboard gets it: a line naming it and how it ended, its arguments, its result."""
    where = f" ({call.server})" if call.server else ""
    ended = call.status if call.status != "ok" else f"ok, {duration_text(call.seconds)}"
    lines = [f"[Tool call: {call.name}{where}: {ended}]", "Arguments:", pretty_arguments(call.arguments)]
    if call.result:
        lines += ["Result:", call.result]
    return "\n".join(lines)


def _step_copy_text(step: ToolStep, with_reasoning: bool) -> list[str]:
    parts = []
    if with_reasoning and step.reasoning.strip():
        parts.append(f"Thinking:\n{step.reasoning.strip()}")
    if step.text.strip():
        parts.append(step.text.strip())
    parts += [call_copy_text(call) for call in step.calls]
    return parts


def copy_with_steps(message: Message, with_reasoning: bool = False) -> str:
    """A message as the clipboard gets it (reasoning_text.copy_text), its tool steps first when it has any:
    each step's text and calls (with their results), then what it wrote after them."""
    if not message.tool_steps:
        return copy_text(message, with_reasoning)
    parts = [part for step in message.tool_steps for part in _step_copy_text(step, with_reasoning)]
    if with_reasoning and message.reasoning:
        parts.append(copy_text(message, with_reasoning=True))
    elif message.content:
        parts.append(message.content)
    return "\n\n".join(parts)

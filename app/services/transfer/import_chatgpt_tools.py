"""ChatGPT's tool calls and their outputs, as the tool steps of the reply they belong to.

In ChatGPT's export a reply that used tools is a chain of nodes under the question: perhaps some
text the model wrote first (recipient "all"), an assistant node addressed to a tool (recipient
"python", "browser", "dalle.text2im", "web.run"...: the call, its content the code or arguments),
a "tool" node (author role "tool", named after the tool: the output), maybe more calls, then the
answer. Tailor keeps such a reply as one message: each call a step (the text written and the thoughts
before it, the call and its output), the answer its content. A call's arguments are JSON, as the
model gave them when they are a JSON object, else wrapped (`{"code": ...}` for code, `{"text": ...}`
for anything else); a call without an output in the export is cancelled, saying so; an output
without a call is a call of the tool that wrote it. ChatGPT's tools are no MCP server: `server` is "".
No Qt here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from app.services.history.tool_steps import (
    MAX_CALLS,
    MAX_SECONDS,
    NAME_LIMIT,
    ToolCallRecord,
    ToolStep,
    unfinished_ended,
)

NO_OUTPUT = "The export holds no output of this call."
# Tool outputs ChatGPT marks as failures (an exception in its Python kernel, a tool's error).
_FAILED = frozenset({"failed_with_in_kernel_exception", "failed_with_error", "failed"})


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def parts_text(content: dict) -> str:
    """The text parts of a content, one a line; an image as "[image]", another file as "[attachment]"."""
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    texts = [p if isinstance(p, str) else "[image]" if "image" in str(p.get("content_type", "")) else "[attachment]"
             for p in parts if isinstance(p, str | dict)]
    return "\n".join(t for t in texts if t)


def call_arguments(content: dict) -> str:
    """A call node's content as JSON arguments: a JSON object it holds, or its text wrapped in one."""
    kind = content.get("content_type")
    text = content["text"] if isinstance(content.get("text"), str) else parts_text(content)
    try:
        if isinstance(json.loads(text), dict):
            return text
    except (ValueError, RecursionError):
        pass
    return json.dumps({"code" if kind == "code" else "text": text}, ensure_ascii=False)


def output_text(content: dict) -> str:
    """What a tool node says: its text, a browsing result, a quote with its source, parts (an image as
    "[image]"); a kind of content not known here is named in brackets."""
    kind = content.get("content_type")
    if kind == "tether_quote":
        head = " ".join(str(content.get(k) or "") for k in ("title", "url")).strip()
        return "\n".join(t for t in (head, str(content.get("text") or "")) if t)
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return content[key]
    if isinstance(content.get("parts"), list):
        return parts_text(content)
    return f"[{kind}]" if isinstance(kind, str) else "[no output]"


def output_failed(message: dict) -> bool:
    """Whether a tool node reports a failure (a system error, an exception in the Python kernel)."""
    if _dict(message.get("content")).get("content_type") == "system_error":
        return True
    status = _dict(_dict(message.get("metadata")).get("aggregate_result")).get("status")
    return status in _FAILED or message.get("status") in _FAILED


def tool_name(name: object, fallback: str = "tool") -> str:
    """A recipient or author name as a call's name: one line, at most NAME_LIMIT characters."""
    text = " ".join(name.split()) if isinstance(name, str) else ""
    return (text or fallback)[:NAME_LIMIT]


@dataclass(slots=True, frozen=True)
class PendingReply:
    """A reply read down one path of the tree, before the text that ends it: its steps so far, what the
    model wrote since its last call, whether current_node is in it, calls left out past MAX_CALLS."""

    steps: tuple[ToolStep, ...] = ()
    text: str = ""
    current: bool = False
    call_at: float | None = None  # when the last call was made (its output's time minus it: its seconds)
    calls: int = 0
    dropped: int = 0
    dropping: bool = False  # the last call was left out: so is its output

    @property
    def open(self) -> bool:
        return bool(self.steps or self.text or self.dropped)

    def wrote(self, text: str) -> PendingReply:
        return replace(self, text=f"{self.text}\n\n{text}" if self.text and text else self.text or text)

    def called(self, call_id: str, name: str, arguments: str, reasoning: str, at: float | None) -> PendingReply:
        """A call, as a new step with the text and thoughts before it; its output comes next (running until then)."""
        if self.calls >= MAX_CALLS:
            return replace(self, dropped=self.dropped + 1, dropping=True)
        step = ToolStep(self.text, (ToolCallRecord(call_id, name, arguments, "", "running"),), reasoning)
        return replace(self, steps=(*self.steps, step), text="", call_at=at, calls=self.calls + 1, dropping=False)

    def answered(self, node_id: str, name: str, text: str, failed: bool, at: float | None) -> PendingReply:
        """A tool's output: the result of the call waiting for it, more of the last call's result (a page
        and its quotes), or else a call of its own."""
        if self.dropping:
            return self
        status = "failed" if failed else "ok"
        last = self.steps[-1].calls[-1] if self.steps else None
        if last is not None and last.status == "running":
            seconds = at - self.call_at if at is not None and self.call_at is not None else 0.0
            ended = last.ended(status, text, seconds if 0 <= seconds <= MAX_SECONDS else 0.0)
            return replace(self, steps=(*self.steps[:-1], self.steps[-1].with_call(ended)))
        if last is not None and last.name == name and not self.text:
            more = replace(last, result=f"{last.result}\n\n{text}" if last.result else text)
            return replace(self, steps=(*self.steps[:-1], self.steps[-1].with_call(more)))
        return replace(self.called(node_id, name, "{}", "", at), call_at=None).answered(node_id, name, text, failed, at)

    def finished_steps(self) -> tuple[ToolStep, ...]:
        """The steps as the reply keeps them: a call the export has no output of is cancelled, saying so."""
        return unfinished_ended(self.steps, NO_OUTPUT)


NO_REPLY = PendingReply()

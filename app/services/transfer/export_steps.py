"""A reply's tool steps as the Markdown and HTML exports show them, before its answer.

Each step shows what the model thought (collapsed) and wrote before it called tools, then each call:
a line saying what was called, where, how it ended and how long it took ("Called `read_file` (server
files) · ok · 0.4 s"), its arguments pretty-printed, and its result. A tool's result can be a whole
file or page: past SHOWN_CHARS the export says how much more there was, and the JSON export keeps
it whole. Results are a tool's text, not the model's: shown as code, never as Markdown or HTML, so a
result holding `<script>` or a code fence stays text. No Qt here.
"""

from __future__ import annotations

import json
from html import escape

from app.services.history.tool_steps import ToolCallRecord, ToolStep
from app.services.markdown_render import highlight_code, render_markdown
from app.services.transfer.markdown_text import close_fences, code_span, fence_for

SHOWN_CHARS = 2000  # of a call's arguments or result, in Markdown and HTML


def cut(text: str, limit: int = SHOWN_CHARS) -> tuple[str, str]:
    """`text` cut to `limit` characters, and the line that says what was left out ("" when nothing was)."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"… ({len(text) - limit:,} more characters)"


def pretty_arguments(arguments: str) -> tuple[str, str]:
    """A call's arguments for reading and their language: JSON indented ("json"), or as written ("")."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments, ""
    return json.dumps(value, indent=2, ensure_ascii=False), "json"


def call_line(call: ToolCallRecord) -> tuple[str, str]:
    """What was called (its name on one line) and the rest of its line: " (server files) · ok · 0.4 s"."""
    name = " ".join(call.name.split()) or "(no name)"
    rest = f" (server {' '.join(call.server.split())})" if call.server.strip() else ""
    rest += f" · {call.status}"
    if call.seconds > 0:
        rest += f" · {call.seconds:.1f} s"
    return name, rest


def _shown_arguments(call: ToolCallRecord) -> tuple[str, str, str] | None:
    """The arguments as shown (cut), their language and the line for what was cut; None for none."""
    if call.arguments.strip() in ("", "{}"):
        return None
    text, lang = pretty_arguments(call.arguments)
    shown, more = cut(text)
    return shown, lang, more


# ---------------------------------------------------------------- Markdown


def _code_block(text: str, lang: str, more: str) -> list[str]:
    """`text` in a fence it cannot close, then the line saying what was cut, if anything was."""
    text = text.rstrip("\n")
    fence = fence_for(text)
    return [f"{fence}{lang or 'text'}", text, fence, "", *([f"*{more}*", ""] if more else [])]


def call_markdown(call: ToolCallRecord) -> list[str]:
    name, rest = call_line(call)
    lines = [f"Called {code_span(name)}{rest}", ""]
    arguments = _shown_arguments(call)
    if arguments is not None:
        lines += _code_block(*arguments)
    if call.result:
        shown, more = cut(call.result)
        lines += ["Result:", "", *_code_block(shown, "", more)]
    return lines


def steps_markdown(steps: tuple[ToolStep, ...]) -> list[str]:
    """The lines of a reply's steps, each ending in a blank line."""
    lines: list[str] = []
    for step in steps:
        if step.reasoning:
            lines += ["<details><summary>Thought</summary>", "", close_fences(step.reasoning).strip("\n"), "",
                      "</details>", ""]
        if step.text.strip():
            lines += [close_fences(step.text).strip("\n"), ""]
        for call in step.calls:
            lines += call_markdown(call)
    return lines


# ---------------------------------------------------------------- HTML

STEPS_CSS = """
.call { border-left: 3px solid #c8cbd6; padding: 0.1rem 0 0.1rem 0.7rem; margin: 0.5rem 0; }
.call-line { font-size: 0.85rem; color: #445; }
.label, .more { font-size: 0.8rem; color: #667; }
"""


def call_html(call: ToolCallRecord) -> str:
    name, rest = call_line(call)
    parts = [f'<div class="call">\n<div class="call-line">Called <code>{escape(name)}</code>{escape(rest)}</div>']
    arguments = _shown_arguments(call)
    if arguments is not None:
        shown, lang, more = arguments
        parts.append(highlight_code(shown, lang))
        if more:
            parts.append(f'<div class="more">{escape(more)}</div>')
    if call.result:
        shown, more = cut(call.result)
        parts += ['<div class="label">Result</div>', highlight_code(shown, "")]
        if more:
            parts.append(f'<div class="more">{escape(more)}</div>')
    parts.append("</div>")
    return "\n".join(parts)


def steps_html(steps: tuple[ToolStep, ...]) -> str:
    """A reply's steps as HTML: the model's writing rendered from Markdown (escaped), the calls as code."""
    parts: list[str] = []
    for step in steps:
        if step.reasoning:
            parts.append(f"<details><summary>Thought</summary>\n{render_markdown(step.reasoning)}</details>")
        if step.text.strip():
            parts.append(render_markdown(step.text))
        parts += [call_html(call) for call in step.calls]
    return "\n".join(parts)

"""A reply's shape, from the request and the model's template: how reasoning is switched, which tools
are rendered and parsed back, and the grammar that constrains the answer.

The formats themselves are data (reasoning_formats.py, tool_formats.py); this file applies them:
`TemplateFormats.of(source)` once per loaded template, `shape_prompt()` per request. Both engines
use it through stream.py, so a template speaks the same to the window, `tailor chat` and the
server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from engine.backend import BackendError
from engine.chat_template import ChatTemplate
from engine.protocol import ChatMessage, ReplyShape
from engine.reply.prompt import render_chat
from engine.reply.reasoning_formats import (
    ReasoningFormat,
    detect_reasoning,
    off_prefill_after,
    prompt_closed,
    starts_inside,
)
from engine.reply.tool_formats import ToolCallFormat, detect_tool_format, template_supports_tools
from engine.structured.json_schema_grammar import GrammarBuilder, SchemaError, schema_grammar

NO_TOOL_SUPPORT = "this model's chat template has no tool support"
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "on": "medium"}


@dataclass(frozen=True, slots=True)
class TemplateFormats:
    """What a chat template speaks: its reasoning format and its tool calls (None: none)."""

    reasoning: ReasoningFormat | None
    tools: ToolCallFormat | None

    @classmethod
    def of(cls, source: str | None) -> TemplateFormats:
        if not source:
            return cls(None, None)
        tools = detect_tool_format(source) if template_supports_tools(source) else None
        return cls(detect_reasoning(source), tools)


@dataclass(frozen=True, slots=True)
class ShapedPrompt:
    """A rendered prompt and how to read the reply it starts."""

    text: str
    reasoning: ReasoningFormat | None  # None: the reply is answer only
    inside: bool  # the prompt opened the think block: the reply starts in it
    think_budget: int | None
    tool_format: ToolCallFormat | None  # None: no tool calls are parsed out of the answer
    tools: tuple[dict, ...]
    grammar: str | None  # GBNF the answer follows (a JSON schema, or forced tool calls)


def template_variables(fmt: ReasoningFormat | None, reasoning: str) -> dict[str, Any]:
    """The template variables that switch reasoning as asked. "auto" thinks where the template can
    (its switch on, as llama.cpp passes it: some templates read an unset switch as off) with the
    template's own effort."""
    if fmt is None:
        return {}
    variables: dict[str, Any] = {}
    if fmt.switch_variable:
        variables[fmt.switch_variable] = reasoning != "off"
    if fmt.effort_variable and reasoning in _EFFORTS:
        variables[fmt.effort_variable] = _EFFORTS[reasoning]
    return variables


def parse_tools(shape: ReplyShape) -> tuple[dict, ...]:
    """The request's tools (OpenAI's shape, checked by the server), none when tool_choice is "none"."""
    if not shape.tools or shape.tool_choice == "none":
        return ()
    # As the server sends them: templates read a description and parameters (gpt-oss's fails without).
    tools = [{"type": "function", "function": {"description": "", "parameters": {"type": "object", "properties": {}},
                                               **t["function"]}} for t in json.loads(shape.tools)]
    if shape.tool_choice not in ("auto", "required"):
        tools = [t for t in tools if t["function"]["name"] == shape.tool_choice]
        if not tools:
            raise BackendError("bad_request", f"tool_choice names '{shape.tool_choice}', which is not among the tools.")
    return tuple(tools)


def shape_prompt(template: ChatTemplate | None, template_error: str | None, messages: list[ChatMessage],
                 shape: ReplyShape, formats: TemplateFormats) -> ShapedPrompt:
    """Render `messages` for `shape`; BackendError for what the model cannot do as asked.

    Reasoning "off" takes what the template offers, in this order: its switch variable, its
    `/no_think`-style switch in the system prompt, an empty think block after the prompt; where it
    has none (gpt-oss), the engine closes the block as soon as it opens (a budget of 0).
    """
    fmt = formats.reasoning
    tools = parse_tools(shape)
    if tools and formats.tools is None:
        raise BackendError("bad_request", f"Tools were given, but {NO_TOOL_SUPPORT}.")
    off = fmt is not None and shape.reasoning == "off"
    if off and fmt.no_think_switch and not fmt.switch_variable:
        messages = _with_switch(messages, fmt.no_think_switch)
    rendered = render_chat(template, template_error, messages, tools=list(tools) or None,
                           variables=template_variables(fmt, shape.reasoning))
    budget = shape.think_budget
    if off and not fmt.switch_variable and not fmt.no_think_switch:
        if fmt.off_prefill:  # the reply starts after an empty block (or the one the prompt opened, closed)
            rendered += off_prefill_after(fmt, rendered)
        else:  # nothing to switch: the block is closed as soon as it opens
            budget = 0
    if fmt is not None and prompt_closed(fmt, rendered):
        fmt = None  # the prompt closed the block: the reply is answer only
    inside = fmt is not None and starts_inside(fmt, rendered)
    return ShapedPrompt(rendered, fmt, inside, budget, formats.tools if tools else None, tools,
                        answer_grammar(shape, formats.tools, tools))


def _with_switch(messages: list[ChatMessage], switch: str) -> list[ChatMessage]:
    """The conversation with `switch` at the end of its system prompt (one is added if it has none)."""
    if messages and messages[0].role == "system":
        head = messages[0]
        return [replace(head, content=f"{head.content}\n{switch}".lstrip()), *messages[1:]]
    return [ChatMessage("system", switch), *messages]


def answer_grammar(shape: ReplyShape, fmt: ToolCallFormat | None, tools: tuple[dict, ...]) -> str | None:
    """The GBNF of the answer: the calls of `tools` when a call is required, else the JSON schema."""
    try:
        if tools and shape.tool_choice != "auto" and fmt is not None:
            return tool_call_grammar(fmt, tools, shape.parallel_calls)
        if shape.json_schema is not None:
            return schema_grammar(json.loads(shape.json_schema))
    except SchemaError as exc:
        raise BackendError("bad_request", f"The schema cannot be followed: {exc}") from None
    return None


def tool_call_grammar(fmt: ToolCallFormat, tools: tuple[dict, ...], parallel: bool) -> str:
    """One or more calls of `tools`, written as the model's format writes them, with arguments that
    follow each function's parameters."""
    b = GrammarBuilder()
    choices = []
    for i, tool in enumerate(tools):
        function = tool["function"]
        args = b.add_schema(function.get("parameters") or {"type": "object"}, name=f"args{i}")
        prefix = fmt.call_prefix % {"name": function["name"]}
        choices.append(f"{b.literal(prefix)} {args} {b.literal(fmt.call_suffix)}")
    call = b.add_rule("call", " | ".join(choices))
    # A format with no separator ends its turn at each call (gpt-oss's <|call|>): one call a reply.
    calls = f"{call} ({b.literal(fmt.separator)} {call})*" if parallel and fmt.separator else call
    if fmt.list_prefix:
        calls = f"{b.literal(fmt.list_prefix)} {calls} {b.literal(fmt.list_suffix)}"
    return b.build(f"[ \\n]? {calls}")

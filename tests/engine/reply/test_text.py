"""engine/reply/text.py: a reply's text split into reasoning, answer and tool calls, token by token, for
texts as real models write them (the engines' end-to-end tests run the same code on llama.cpp)."""

from __future__ import annotations

import json

import pytest

from engine.chat_template import ChatTemplate
from engine.protocol import ChatMessage, ReplyShape
from engine.reply.shape import TemplateFormats, shape_prompt
from engine.reply.text import ReplyText
from tests.paths import CHAT_TEMPLATES

TEMPLATES = CHAT_TEMPLATES
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _shaped(template: str, shape: ReplyShape):
    source = (TEMPLATES / template).read_text(encoding="utf-8")
    return shape_prompt(ChatTemplate(source), None, [ChatMessage("user", "Weather in Paris?")], shape,
                        TemplateFormats.of(source))


def _run(text: str, shaped, tokens: int = 3, stop: tuple[str, ...] = (), cancelled: bool = False):
    out: list[tuple[bool, str]] = []
    reply = ReplyText(stop, lambda t, r: out.append((r, t)), shaped)
    for i in range(0, len(text), tokens):
        reply.feed(text[i:i + tokens])
    return reply.end(cancelled), out, reply


QWQ_REPLY = "Paris is in France, so I look it up.\n</think>\n\nIt is sunny in Paris."


@pytest.mark.parametrize("size", [1, 2, 5, 40])
def test_reasoning_then_answer_however_the_tokens_cut_the_text(size: int):
    parts, out, reply = _run(QWQ_REPLY, _shaped("Qwen-QwQ-32B.jinja", ReplyShape()), size)
    assert parts.reasoning.strip() == "Paris is in France, so I look it up."
    assert parts.answer == "It is sunny in Paris."
    assert parts.reasoning_closed and not parts.tool_calls
    assert "".join(t for r, t in out if r) == parts.reasoning and "".join(t for r, t in out if not r) == parts.answer
    assert reply.reasoning_tokens >= 1


def test_stop_strings_end_the_answer_not_the_reasoning():
    parts, _, _ = _run("Think. END?\n</think>\n\nAnswer here. END more", _shaped("Qwen-QwQ-32B.jinja", ReplyShape()),
                       stop=("END",))
    assert "END?" in parts.reasoning
    assert parts.answer == "Answer here. "


def test_the_budget_gives_the_close_once_while_reasoning():
    shaped = _shaped("Qwen-QwQ-32B.jinja", ReplyShape(think_budget=2))
    reply = ReplyText((), lambda t, r: None, shaped)
    reply.feed("one ")
    assert reply.close_now() is None
    reply.feed("two ")
    close = reply.close_now()
    assert close and "</think>" in close
    assert reply.close_now() is None
    reply.feed(close)
    assert reply.in_answer


def test_a_tool_call_is_parsed_and_not_shown():
    shaped = _shaped("Qwen-Qwen3-0.6B.jinja", ReplyShape(reasoning="off", tools=json.dumps([WEATHER])))
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    parts, out, _ = _run(text, shaped)
    assert [(c.name, json.loads(c.arguments)) for c in parts.tool_calls] == [("get_weather", {"city": "Paris"})]
    shown = "".join(t for _, t in out)
    assert "<tool_call>" not in shown and shown.strip() == "Let me check."


@pytest.mark.parametrize("call", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"\n</tool_call>',  # invalid JSON
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',  # an unknown function
    '<tool_call>\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n</tool_call>',  # arguments off schema
])
def test_a_malformed_tool_call_is_given_back_as_text(call: str):
    shaped = _shaped("Qwen-Qwen3-0.6B.jinja", ReplyShape(reasoning="off", tools=json.dumps([WEATHER])))
    parts, out, _ = _run(call, shaped)
    assert parts.tool_calls == ()
    assert parts.answer == call and "".join(t for _, t in out) == call


def test_a_cancelled_reply_keeps_what_it_streamed():
    parts, _, _ = _run("Half a thought", _shaped("Qwen-QwQ-32B.jinja", ReplyShape()), cancelled=True)
    assert parts.reasoning == "Half a thought" and parts.answer == ""
    assert not parts.reasoning_closed

"""Reasoning, JSON-schema answers and tool calls on real llama.cpp: the starter model's weights under
Qwen3's, QwQ's and gpt-oss's real templates (tests/fixtures/format_models.py), in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from engine.backend import BackendError
from engine.gguf.backend import GgufBackend
from engine.protocol import ChatMessage, GenerateRequest, LoadRequest, ReplyShape, SamplingParams
from tests.fixtures.format_models import TIME_TOOL, WEATHER_TOOL

GREEDY = SamplingParams(temperature=0.0, max_tokens=96)
ASK = (ChatMessage("user", "Write a short story about a dragon who bakes bread."),)
WEATHER = WEATHER_TOOL
# Without a description, as a client may send it: gpt-oss's template reads one, the engine supplies it.
TIME = {"type": "function", "function": {k: v for k, v in TIME_TOOL["function"].items() if k != "description"}}


def _reply(backend: GgufBackend, shape: ReplyShape, messages=ASK, sampling: SamplingParams = GREEDY):
    pieces: list[tuple[bool, str]] = []
    done = backend.generate(GenerateRequest(1, tuple(messages), sampling, shape=shape),
                            lambda text, reasoning=False: pieces.append((reasoning, text)), lambda: False)
    return done, pieces


@pytest.fixture(scope="module")
def loaded(backend: GgufBackend, format_models: Callable[[str], Path]) -> Callable[[str], GgufBackend]:
    """The backend with a format model loaded (kept loaded for the next test that asks for it)."""

    def load(name: str) -> GgufBackend:
        path = str(format_models(name))
        if backend._info is None or backend._info.path != path:  # noqa: SLF001 - which model it holds
            backend.load(LoadRequest(path, n_ctx=2048))
        return backend

    return load


def test_the_template_s_formats_are_in_the_model_info(backend: GgufBackend, format_models):
    info = backend.load(LoadRequest(str(format_models("qwq")), n_ctx=2048))
    assert (info.reasoning_format, info.tool_format) == ("think", "hermes")
    info = backend.load(LoadRequest(str(format_models("gpt-oss")), n_ctx=2048))
    assert info.reasoning_format == "harmony"


def test_a_reply_that_starts_inside_its_think_block_streams_it_apart_and_the_budget_closes_it(loaded):
    done, pieces = _reply(loaded("qwq"), ReplyShape(think_budget=12))
    kinds = [reasoning for reasoning, _ in pieces]
    assert kinds[0] is True and False in kinds
    assert kinds == sorted(kinds, reverse=True)  # every reasoning piece before the answer
    assert "".join(t for r, t in pieces if r) == done.reasoning and done.reasoning
    assert "".join(t for r, t in pieces if not r) == done.text and done.text
    assert "</think>" not in done.reasoning and not done.text.startswith(("</think>", "\n"))
    assert done.reasoning_closed
    assert 12 <= done.stats.reasoning_tokens <= 12 + 6  # the budget, and the tokens that close the block
    assert done.stats.gen_tokens > done.stats.reasoning_tokens
    assert done.stats.reasoning_s > 0


def test_a_think_block_cut_off_by_max_tokens_is_kept_and_marked(loaded):
    done, _ = _reply(loaded("qwq"), ReplyShape(), sampling=SamplingParams(temperature=0.0, max_tokens=10))
    assert done.finish_reason == "length"
    assert done.reasoning and done.text == ""
    assert not done.reasoning_closed
    assert done.stats.reasoning_tokens == 10


def test_reasoning_off_renders_the_template_s_switch(loaded):
    done, pieces = _reply(loaded("qwq"), ReplyShape(reasoning="off"))
    assert done.reasoning == "" and done.stats.reasoning_tokens == 0
    assert all(not r for r, _ in pieces) and done.text


def test_gpt_oss_effort_reaches_its_template(backend: GgufBackend, format_models):
    from engine.reply.shape import TemplateFormats, shape_prompt

    backend.load(LoadRequest(str(format_models("gpt-oss")), n_ctx=2048))
    template, formats = backend._template, backend._formats  # noqa: SLF001 - the backend's own template
    high = shape_prompt(template, None, list(ASK), ReplyShape(reasoning="high"), formats)
    low = shape_prompt(template, None, list(ASK), ReplyShape(reasoning="low"), formats)
    assert "Reasoning: high" in high.text and "Reasoning: low" in low.text
    assert isinstance(formats, TemplateFormats)


def test_a_json_schema_answer_follows_its_schema_after_the_reasoning(loaded):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                               "population": {"type": "integer", "minimum": 0, "maximum": 99999999}},
              "required": ["city", "population"]}
    done, _ = _reply(loaded("qwq"), ReplyShape(think_budget=8, json_schema=json.dumps(schema)),
                     sampling=SamplingParams(temperature=0.0, max_tokens=120))
    assert done.finish_reason == "stop" and done.reasoning
    jsonschema.validate(json.loads(done.text), schema)


def test_a_required_tool_call_is_written_by_the_grammar_and_parsed(loaded):
    shape = ReplyShape(reasoning="off", tools=json.dumps([WEATHER, TIME]), tool_choice="required",
                       parallel_calls=False)
    done, pieces = _reply(loaded("qwen3"), shape, messages=(ChatMessage("user", "Weather in Paris?"),))
    assert done.finish_reason == "tool_calls"
    assert len(done.tool_calls) == 1
    call = done.tool_calls[0]
    assert call.name in ("get_weather", "get_time") and call.id.startswith("call_")
    tool = WEATHER if call.name == "get_weather" else TIME
    jsonschema.validate(json.loads(call.arguments), tool["function"]["parameters"])
    assert "<tool_call>" not in "".join(t for _, t in pieces)  # the call's text is not shown


def test_a_named_tool_is_the_one_called(loaded):
    shape = ReplyShape(reasoning="off", tools=json.dumps([WEATHER, TIME]), tool_choice="get_time")
    done, _ = _reply(loaded("qwen3"), shape, messages=(ChatMessage("user", "What time is it?"),))
    assert done.tool_calls and {c.name for c in done.tool_calls} == {"get_time"}


def test_tool_answers_go_back_through_the_template(loaded):
    from engine.protocol import ToolCall

    call = ToolCall("call_1", "get_weather", json.dumps({"city": "Paris", "unit": "celsius"}))
    messages = (ChatMessage("user", "Weather in Paris?"), ChatMessage("assistant", "", (call,)),
                ChatMessage("tool", "18 degrees and sunny", tool_call_id="call_1", name="get_weather"))
    done, _ = _reply(loaded("qwen3"), ReplyShape(reasoning="off", tools=json.dumps([WEATHER])), messages=messages)
    assert done.finish_reason in ("stop", "length", "tool_calls")
    assert done.stats.prompt_tokens > 60  # the call and its answer were rendered into the prompt


def test_tools_on_a_template_without_them_are_refused(backend: GgufBackend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    with pytest.raises(BackendError, match="no tool support"):
        _reply(backend, ReplyShape(tools=json.dumps([WEATHER])))


def test_the_next_turn_reuses_the_prompt_without_the_reasoning(loaded):
    backend = loaded("qwq")
    first, _ = _reply(backend, ReplyShape(think_budget=16))
    history = (*ASK, ChatMessage("assistant", first.text), ChatMessage("user", "And of Italy?"))
    second, _ = _reply(backend, ReplyShape(think_budget=16), messages=history)
    # Everything up to the last answer is in the cache already: the first turn's prompt at least.
    assert second.stats.cached_tokens >= first.stats.prompt_tokens - 4


@pytest.mark.parametrize("name", ["gpt-oss", "llama3", "mistral"])
def test_a_required_call_in_each_format_parses_back(loaded, name: str):
    """gpt-oss's harmony commentary message, Llama 3's JSON, Mistral's [TOOL_CALLS] list."""
    shape = ReplyShape(tools=json.dumps([WEATHER, TIME]), tool_choice="required")
    done, pieces = _reply(loaded(name), shape, messages=(ChatMessage("user", "Weather in Paris?"),),
                          sampling=SamplingParams(temperature=0.0, max_tokens=120))
    assert done.finish_reason == "tool_calls" and done.tool_calls, done
    for call in done.tool_calls:
        tool = WEATHER if call.name == "get_weather" else TIME
        jsonschema.validate(json.loads(call.arguments), tool["function"]["parameters"])
    assert done.text == "" and "".join(t for _, t in pieces).strip() == ""


def test_a_model_that_would_end_while_thinking_answers_a_required_call(loaded):
    """QwQ's prompt opens the think block and the starter model ends inside it: with a call required,
    its end of generation closes the block instead, and the call follows."""
    shape = ReplyShape(tools=json.dumps([WEATHER, TIME]), tool_choice="required")
    ask = ChatMessage("user", "What is the weather in Paris and the time in Tokyo?")
    done, _ = _reply(loaded("qwq"), shape, messages=(ask,), sampling=SamplingParams(temperature=0.0, max_tokens=150))
    assert done.reasoning and done.stats.reasoning_tokens
    assert done.finish_reason == "tool_calls" and done.tool_calls

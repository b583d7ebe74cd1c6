"""Tool calls through `tailor serve` with the official `openai` client, whole and streamed: the starter
model's weights under Qwen3's real template (Hermes `<tool_call>` JSON), on a server of their own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import jsonschema
import openai
import pytest

from app.server.runner import ServerThread
from tests.app.server.conftest import format_server, served_model
from tests.fixtures.format_models import TIME_TOOL, WEATHER_TOOL

WEATHER, TIME = WEATHER_TOOL, TIME_TOOL
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with format_server(format_models("qwen3"), tmp_path_factory.mktemp("logs")) as thread:
        yield thread


@pytest.fixture
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


def _check(call) -> dict:  # noqa: ANN001 - the openai package's tool call type
    tool = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, tool["function"]["parameters"])
    return arguments


def test_a_required_call_comes_back_as_openai_tool_calls(client: openai.OpenAI):
    reply = client.chat.completions.create(model=served_model(client), messages=ASK, tools=TOOLS, tool_choice="required",
                                           temperature=0, reasoning_effort="none")
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls and choice.message.content is None
    for call in choice.message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        _check(call)


def test_a_named_function_is_the_one_called(client: openai.OpenAI):
    reply = client.chat.completions.create(
        model=served_model(client), messages=ASK, tools=TOOLS, temperature=0, reasoning_effort="none",
        tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False)
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_time"]
    _check(calls[0])


def test_a_streamed_call_arrives_in_openai_s_chunks(client: openai.OpenAI):
    stream = client.chat.completions.create(model=served_model(client), messages=ASK, tools=TOOLS, tool_choice="required",
                                            temperature=0, reasoning_effort="none", stream=True)
    calls: dict[int, dict] = {}
    finish = None
    for chunk in stream:
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or []:
            first = delta.index not in calls
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            # As OpenAI streams them: the id and the name in a call's first chunk only, then arguments.
            assert bool(delta.id) == first and bool(delta.function.name) == first, delta
            call["id"] += delta.id or ""
            call["name"] += delta.function.name or ""
            call["arguments"] += delta.function.arguments or ""
        finish = choice.finish_reason or finish
    assert finish == "tool_calls" and calls
    assert sorted(calls) == list(range(len(calls)))  # indexes from 0, none skipped
    assert len({c["id"] for c in calls.values()}) == len(calls)
    for call in calls.values():  # (a greedy reply is compared with no other: a warm prefix may tip a near tie)
        assert call["id"].startswith("call_")
        _check(SimpleNamespace(function=SimpleNamespace(name=call["name"], arguments=call["arguments"])))


def test_the_tool_s_answer_goes_back_and_the_model_replies(client: openai.OpenAI):
    first = client.chat.completions.create(model=served_model(client), messages=ASK, tools=TOOLS, tool_choice="required",
                                           temperature=0, reasoning_effort="none", parallel_tool_calls=False)
    call = first.choices[0].message.tool_calls[0]
    messages = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"}]
    second = client.chat.completions.create(model=served_model(client), messages=messages, tools=TOOLS, tool_choice="none",
                                            temperature=0, max_tokens=40, reasoning_effort="none")
    alone = client.chat.completions.create(model=served_model(client), messages=ASK, tools=TOOLS, tool_choice="none",
                                           temperature=0, max_tokens=1, reasoning_effort="none")
    assert second.choices[0].message.content
    # The call and its answer were rendered into the prompt (as <tool_call> and <tool_response> blocks).
    assert second.usage.prompt_tokens > alone.usage.prompt_tokens + 20


def test_a_schema_the_grammar_cannot_follow_is_a_400_naming_the_keyword(server: ServerThread, client):
    tool = {"type": "function", "function": {"name": "tag", "parameters": {
        "type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}}}
    answer = httpx.post(f"{server.url}/chat/completions", timeout=30, json={
        "model": served_model(client), "messages": ASK, "tools": [tool], "tool_choice": "required"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "tools[0].function.parameters" and "uniqueItems" in error["message"]


@pytest.mark.parametrize(("tools", "param"), [
    ([{"type": "function", "function": {"name": "bad name!"}}], "tools[0].function.name"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "strng"}}}], "tools[0].function.parameters"),
    ([{"type": "retrieval"}], "tools[0]"),
])
def test_bad_tools_are_refused_by_name(server: ServerThread, client, tools: list, param: str):
    answer = httpx.post(f"{server.url}/chat/completions", timeout=30,
                        json={"model": served_model(client), "messages": ASK, "tools": tools})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param


def test_a_tool_choice_naming_no_tool_is_refused(server: ServerThread, client):
    answer = httpx.post(f"{server.url}/chat/completions", timeout=30, json={
        "model": served_model(client), "messages": ASK, "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "get_stock"}}})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "tool_choice"


def test_a_parallel_call_names_both_tools_whole_and_streamed(client: openai.OpenAI):
    both = [{"role": "user", "content": "What is the weather in Paris and the time in Tokyo?"}]
    whole = client.chat.completions.create(model=served_model(client), messages=both, tools=TOOLS, tool_choice="required",
                                           temperature=0, reasoning_effort="none")
    calls = whole.choices[0].message.tool_calls
    assert {c.function.name for c in calls} == {"get_weather", "get_time"}
    assert len({c.id for c in calls}) == len(calls)
    for call in calls:
        _check(call)
    streamed: dict[int, str] = {}
    for chunk in client.chat.completions.create(model=served_model(client), messages=both, tools=TOOLS,
                                                tool_choice="required", temperature=0, reasoning_effort="none",
                                                stream=True):
        for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            streamed[delta.index] = streamed.get(delta.index, "") + (delta.function.name or "")
    assert [streamed[i] for i in sorted(streamed)] == [c.function.name for c in calls]

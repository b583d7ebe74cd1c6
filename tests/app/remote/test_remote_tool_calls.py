"""Tools through a remote endpoint: the remote model sees them, its calls come back in the Done.

The servers are real, on loopback: Tailor's own (`tailor serve` over the starter model's weights under
Qwen3's template, which takes tools), and tests/fixtures/bad_openai_server.py for the ways servers
differ in streaming calls (ids missing, no index) and for what the request body carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonschema
import pytest

from app.remote.openai_client import RemoteChat, RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from engine.protocol import ChatMessage, Done, Error, Event, ReplyShape, SamplingParams, Token, ToolCall
from tests.app.server.conftest import format_server
from tests.fixtures.bad_openai_server import BadOpenAIServer
from tests.fixtures.bad_tool_calls import TIME_ARGS, USAGE, WEATHER_ARGS
from tests.fixtures.format_models import TIME_TOOL, WEATHER_TOOL
from tests.fixtures.range_server import serving

TOOLS = [WEATHER_TOOL, TIME_TOOL]
ASK = [ChatMessage("user", "What is the weather in Paris?")]
GREEDY = SamplingParams(temperature=0.0, max_tokens=128, seed=1)
DEADLINE_S = 120  # a reply on a loaded CI machine; each comes in well under a second alone


def shape(tool_choice: str = "auto", parallel: bool = True) -> ReplyShape:
    return ReplyShape(reasoning="off", tools=json.dumps(TOOLS), tool_choice=tool_choice, parallel_calls=parallel)


def reply(url: str, model: str, messages=ASK, sampling=GREEDY, reply_shape: ReplyShape | None = None) -> list[Event]:
    """The events of one reply through a RemoteEngine."""
    engine = RemoteEngine(RemoteEndpoint(url, model, read_timeout_s=DEADLINE_S))
    try:
        request_id = engine.generate(messages, sampling, shape=reply_shape)
        return list(engine.stream(request_id))
    finally:
        engine.shutdown()


def check(call: ToolCall) -> dict:
    """The call's arguments, valid for its tool's schema."""
    tool = {t["function"]["name"]: t for t in TOOLS}[call.name]
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, tool["function"]["parameters"])
    return arguments


@pytest.fixture
def bad_server() -> Iterator[BadOpenAIServer]:
    with serving(BadOpenAIServer()) as server:
        yield server


@pytest.fixture(scope="module")
def qwen_server(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Tailor's server over a model whose template takes tools; yields its URL."""
    with format_server(format_models("qwen3"), tmp_path_factory.mktemp("logs")) as thread:
        yield thread.url


def served(url: str) -> str:
    chat = RemoteChat(RemoteEndpoint(url, ""))
    try:
        return chat.models()[0]
    finally:
        chat.close()


# ---------------------------------------------------------------- Tailor's own server, a real model


def test_a_required_call_through_tailor_s_server_then_the_tool_turn_goes_back(qwen_server: str):
    model = served(qwen_server)
    first = reply(qwen_server, model, reply_shape=shape("required", parallel=False))[-1]  # (one call: half the time)
    assert isinstance(first, Done), first
    assert first.finish_reason == "tool_calls" and len(first.tool_calls) == 1
    for call in first.tool_calls:
        check(call)
        assert call.id
    answered = [*ASK, ChatMessage("assistant", first.text, first.tool_calls),
                *(ChatMessage("tool", "18 degrees and sunny", tool_call_id=c.id, name=c.name) for c in first.tool_calls)]
    short = SamplingParams(temperature=0.0, max_tokens=40, seed=1)
    second = reply(qwen_server, model, answered, short, shape("none"))[-1]
    alone = reply(qwen_server, model, ASK, SamplingParams(temperature=0.0, max_tokens=1), shape("none"))[-1]
    assert isinstance(second, Done) and isinstance(alone, Done), (second, alone)
    # (what the tiny model says is not the point, nor always something: it may end at once)
    assert second.finish_reason in ("stop", "length") and not second.tool_calls and second.stats.gen_tokens >= 1
    # The calls and their answers were rendered into the prompt (as <tool_call> and <tool_response> blocks).
    assert second.stats.prompt_tokens > alone.stats.prompt_tokens + 20


def test_a_named_function_is_the_one_tailor_s_server_calls(qwen_server: str):
    end = reply(qwen_server, served(qwen_server), reply_shape=shape("get_time", parallel=False))[-1]
    assert isinstance(end, Done) and end.finish_reason == "tool_calls", end
    assert [c.name for c in end.tool_calls] == ["get_time"]
    check(end.tool_calls[0])


def test_a_plain_reply_from_the_same_server_has_no_calls(qwen_server: str):
    events = reply(qwen_server, served(qwen_server), sampling=SamplingParams(temperature=0.0, max_tokens=8),
                   reply_shape=ReplyShape(reasoning="off"))
    end = events[-1]
    assert isinstance(end, Done) and end.finish_reason in ("stop", "length") and not end.tool_calls
    assert end.text == "".join(e.text for e in events if isinstance(e, Token) and not e.reasoning)


# ---------------------------------------------------------------- what goes out


def test_the_body_carries_the_tools_and_the_tool_turns_in_openai_s_shape(bad_server: BadOpenAIServer):
    called = ToolCall("call_w", "get_weather", WEATHER_ARGS)
    conversation = [*ASK, ChatMessage("assistant", "", (called,)),
                    ChatMessage("tool", "18 degrees", tool_call_id="call_w", name="get_weather"),
                    ChatMessage("assistant", "Let me look.", (called,)),
                    ChatMessage("tool", "19 degrees", tool_call_id="call_w")]
    end = reply(bad_server.url, "ok", conversation, reply_shape=shape("get_time", parallel=False))[-1]
    assert isinstance(end, Done) and end.text == "Hello"
    body = bad_server.bodies[-1]
    assert body["tools"] == TOOLS and body["parallel_tool_calls"] is False
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    wire = {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}}
    assert body["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [wire]},
        {"role": "tool", "content": "18 degrees", "tool_call_id": "call_w", "name": "get_weather"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [wire]},
        {"role": "tool", "content": "19 degrees", "tool_call_id": "call_w"},
    ]


@pytest.mark.parametrize("choice", ["auto", "required", "none"])
def test_the_usual_choices_go_as_words(bad_server: BadOpenAIServer, choice: str):
    reply(bad_server.url, "ok", reply_shape=shape(choice))
    body = bad_server.bodies[-1]
    assert body["tool_choice"] == choice and body["parallel_tool_calls"] is True


@pytest.mark.parametrize("reply_shape", [None, ReplyShape(), ReplyShape(tools="[]", tool_choice="required")])
def test_a_reply_without_tools_sends_the_body_it_always_did(bad_server: BadOpenAIServer,
                                                            reply_shape: ReplyShape | None):
    reply(bad_server.url, "ok", reply_shape=reply_shape)
    body = bad_server.bodies[-1]
    assert set(body) == {"model", "messages", "max_tokens", "temperature", "top_p", "seed", "stream",
                         "stream_options"}
    assert body["messages"] == [{"role": "user", "content": ASK[0].content}]


def test_tools_that_are_not_json_are_a_bad_request(bad_server: BadOpenAIServer):
    end = reply(bad_server.url, "ok", reply_shape=ReplyShape(tools="[{not json"))[-1]
    assert isinstance(end, Error) and end.kind == "bad_request" and "not JSON" in end.message
    assert not bad_server.bodies  # nothing was sent


# ---------------------------------------------------------------- what comes back


def test_streamed_calls_are_put_together_by_index(bad_server: BadOpenAIServer):
    events = reply(bad_server.url, "calls", reply_shape=shape())
    end = events[-1]
    assert isinstance(end, Done) and end.finish_reason == "tool_calls" and end.text == ""
    assert end.tool_calls == (ToolCall("call_w", "get_weather", WEATHER_ARGS), ToolCall("call_t", "get_time", TIME_ARGS))
    assert not [e for e in events if isinstance(e, Token)]  # calls are no text
    assert end.stats.prompt_tokens == USAGE["prompt_tokens"] and end.stats.gen_tokens == USAGE["completion_tokens"]


def test_calls_without_ids_get_ids_made_up(bad_server: BadOpenAIServer):
    end = reply(bad_server.url, "calls_no_ids", reply_shape=shape())[-1]
    assert isinstance(end, Done) and end.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in end.tool_calls] == [("get_weather", WEATHER_ARGS), ("get_time", TIME_ARGS)]
    ids = [c.id for c in end.tool_calls]
    assert all(i.startswith("call_") and len(i) > 5 for i in ids) and len(set(ids)) == 2


def test_calls_without_an_index_are_told_apart_by_their_ids(bad_server: BadOpenAIServer):
    end = reply(bad_server.url, "calls_no_index", reply_shape=shape())[-1]
    assert isinstance(end, Done) and end.finish_reason == "tool_calls"  # (the server said "stop")
    assert end.tool_calls == (ToolCall("call_w", "get_weather", WEATHER_ARGS), ToolCall("call_t", "get_time", TIME_ARGS))


@pytest.mark.parametrize("reply_shape", [None, shape("none")])
def test_calls_of_tools_never_given_are_passed_over(bad_server: BadOpenAIServer, reply_shape: ReplyShape | None):
    end = reply(bad_server.url, "calls_untold", reply_shape=reply_shape)[-1]
    assert isinstance(end, Done) and end.text == "Hello"
    assert end.finish_reason == "stop" and end.tool_calls == ()

"""Anthropic's Messages API through `tailor serve`, driven by the official `anthropic` client: the starter
model's weights under Qwen3's real template (tools) and QwQ's (its prompt opens the think block), each on a
server of its own that wants a key, which the client sends as `x-api-key`.

The client of this version has no temperature argument (Anthropic's newest models take none); the server
honours the field, which tests send with `extra_body` for greedy replies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import httpx
import jsonschema
import pytest

from app.server.config import ServerConfig
from app.server.runner import ServerThread
from tests.app.server.conftest import format_server

KEY = "sk-tailor-anthropic-test"
GREEDY = {"temperature": 0}
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
STORY = [{"role": "user", "content": "Write a short story about a dragon who bakes bread."}]
WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                             "unit": {"enum": ["celsius", "fahrenheit"]}},
                            "required": ["city", "unit"]}}
TIME = {"name": "get_time", "description": "The time in a time zone.",
        "input_schema": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 12}},
                         "required": ["zone"]}}
ONE_CALL = {"type": "any", "disable_parallel_tool_use": True}


def _server(model: Path, logs: Path) -> Iterator[ServerThread]:
    with format_server(model, logs, config=ServerConfig(port=0, api_key=KEY)) as thread:
        yield thread


@pytest.fixture(scope="module")
def qwen3(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    yield from _server(format_models("qwen3"), tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="module")
def qwq(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    yield from _server(format_models("qwq"), tmp_path_factory.mktemp("logs"))


def _client(server: ServerThread, key: str = KEY) -> anthropic.Anthropic:
    # The client adds /v1/messages to its base URL.
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key=key, max_retries=0, timeout=120)


def _model(server: ServerThread) -> str:
    answer = httpx.get(f"{server.url}/models", headers={"x-api-key": KEY}, timeout=30)
    return answer.json()["data"][0]["id"]


@pytest.fixture(scope="module")
def client(qwen3: ServerThread) -> anthropic.Anthropic:
    return _client(qwen3)


@pytest.fixture(scope="module")
def model(qwen3: ServerThread) -> str:
    return _model(qwen3)


def test_a_whole_message_comes_back_in_anthropic_s_shape(client: anthropic.Anthropic, model: str):
    message = client.messages.create(model=model, max_tokens=40, messages=FRANCE, extra_body=GREEDY)
    assert message.id.startswith("msg_") and message.type == "message" and message.role == "assistant"
    assert message.model == model
    assert [b.type for b in message.content] == ["text"]  # no thinking unless asked for
    assert "Paris" in message.content[0].text
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    usage = message.usage
    assert usage.output_tokens > 0 and usage.output_tokens_details.thinking_tokens == 0
    assert usage.input_tokens > 0 and usage.cache_read_input_tokens is not None


def test_max_tokens_ends_the_reply_as_max_tokens(client: anthropic.Anthropic, model: str):
    message = client.messages.create(model=model, max_tokens=3, messages=STORY, extra_body=GREEDY)
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3


def test_a_streamed_message_arrives_as_anthropic_s_events(client: anthropic.Anthropic, model: str):
    with client.messages.stream(model=model, max_tokens=40, messages=FRANCE, extra_body=GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and "Paris" in text
    assert final.id.startswith("msg_") and [b.type for b in final.content] == ["text"]
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    # message_start cannot know the prompt's tokens yet: message_delta brings them, with the output's.
    whole = client.messages.create(model=model, max_tokens=1, messages=FRANCE, extra_body=GREEDY)
    usage = final.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == (
        whole.usage.input_tokens + whole.usage.cache_read_input_tokens)
    assert usage.output_tokens > 0


def test_the_raw_stream_has_every_event_in_order(qwen3: ServerThread, model: str):
    body = {"model": model, "max_tokens": 20, "messages": FRANCE, "stream": True, "temperature": 0}
    with httpx.stream("POST", f"{qwen3.url}/messages", json=body, timeout=60,
                      headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"}) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        names = [line.removeprefix("event: ") for line in answer.iter_lines() if line.startswith("event: ")]
    assert names[:4] == ["message_start", "ping", "content_block_start", "content_block_delta"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def _check(block) -> dict:  # noqa: ANN001 - the anthropic package's ToolUseBlock
    tool = {"get_weather": WEATHER, "get_time": TIME}[block.name]
    jsonschema.validate(block.input, tool["input_schema"])
    return block.input


def test_a_tool_use_and_its_result_go_round(client: anthropic.Anthropic, model: str):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.messages.create(model=model, max_tokens=200, messages=ask, tools=[WEATHER, TIME],
                                   tool_choice=ONE_CALL, extra_body=GREEDY)
    assert first.stop_reason == "tool_use"
    calls = [b for b in first.content if b.type == "tool_use"]
    assert len(calls) == 1 and calls[0].id.startswith("toolu_")
    _check(calls[0])
    answered = [*ask, {"role": "assistant", "content": first.model_dump(exclude_none=True)["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                              "content": "18 degrees and sunny"},
                                             {"type": "text", "text": "Thanks. Say it in one sentence."}]}]
    second = client.messages.create(model=model, max_tokens=40, messages=answered, tools=[WEATHER, TIME],
                                    tool_choice={"type": "none"}, extra_body=GREEDY)
    assert second.stop_reason in ("end_turn", "max_tokens")
    assert second.content[0].type == "text" and second.content[0].text
    alone = client.messages.count_tokens(model=model, messages=ask, tools=[WEATHER, TIME],
                                         tool_choice={"type": "none"})
    # The call and its result were rendered into the prompt (as <tool_call> and <tool_response> blocks).
    assert second.usage.input_tokens + second.usage.cache_read_input_tokens > alone.input_tokens + 20


def test_a_named_tool_is_the_one_called_and_its_input_streams(client: anthropic.Anthropic, model: str):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    with client.messages.stream(model=model, max_tokens=200, messages=ask, tools=[WEATHER, TIME],
                                tool_choice={"type": "tool", "name": "get_time", "disable_parallel_tool_use": True},
                                extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    calls = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and [c.name for c in calls] == ["get_time"]
    assert calls[0].id.startswith("toolu_")
    _check(calls[0])  # the input_json_delta parsed back into an object by the client


def test_thinking_comes_back_in_thinking_blocks_and_its_budget_caps_it(qwq: ServerThread):
    client, model = _client(qwq), _model(qwq)
    message = client.messages.create(model=model, max_tokens=80, messages=STORY, extra_body=GREEDY,
                                     thinking={"type": "enabled", "budget_tokens": 12})
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "text"], kinds
    thinking = message.content[0]
    assert thinking.thinking and "<think>" not in thinking.thinking and isinstance(thinking.signature, str)
    assert message.content[1].text
    assert 12 <= message.usage.output_tokens_details.thinking_tokens <= 12 + 6  # the budget, and its closing
    with client.messages.stream(model=model, max_tokens=80, messages=STORY, extra_body=GREEDY,
                                thinking={"type": "enabled", "budget_tokens": 12}) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].signature and final.content[0].thinking
    # Thinking blocks given back are taken (not rendered again).
    again = [*STORY, {"role": "assistant", "content": final.model_dump(exclude_none=True)["content"]},
             {"role": "user", "content": "Shorter, please."}]
    reply = client.messages.create(model=model, max_tokens=10, messages=again, thinking={"type": "disabled"},
                                   extra_body=GREEDY)
    assert [b.type for b in reply.content] == ["text"]


def test_a_stop_sequence_ends_the_reply_and_is_named(client: anthropic.Anthropic, model: str):
    message = client.messages.create(model=model, max_tokens=60, messages=STORY, stop_sequences=["e"],
                                     extra_body=GREEDY)
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "e"
    assert "e" not in message.content[0].text
    with client.messages.stream(model=model, max_tokens=60, messages=STORY, stop_sequences=["Zzz", "e"],
                                extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "e"


def test_count_tokens_is_the_prompt_a_create_reports(client: anthropic.Anthropic, model: str):
    request = {"model": model, "system": [{"type": "text", "text": "You answer in one word."}],
               "messages": [{"role": "user", "content": "Name a colour of the sky at dusk, please."}],
               "tools": [WEATHER]}
    counted = client.messages.count_tokens(**request)
    message = client.messages.create(max_tokens=1, extra_body=GREEDY, **request)
    # Anthropic's usage splits the prompt: the tokens prefilled now, and those the cache held.
    assert counted.input_tokens == message.usage.input_tokens + message.usage.cache_read_input_tokens
    assert client.messages.count_tokens(model=model, messages=request["messages"]).input_tokens < counted.input_tokens


def test_an_unknown_block_type_is_a_400_naming_it(client: anthropic.Anthropic, model: str):
    messages = [*FRANCE, {"role": "assistant", "content": "Paris."},
                {"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                             "data": "Paris is in France."}}]}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=model, max_tokens=10, messages=messages)
    assert caught.value.body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages[2].content[0].type: 'document' is not supported here."}}


@pytest.mark.parametrize(("extra", "named"), [
    ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
    ({"output_config": {"verbosity": "low"}}, "output_config.verbosity"),
    ({"output_config": {"format": {"type": "json_schema"}}}, "output_config.format"),
    ({"output_config": {"format": {"type": "json_schema", "schema": {"type": "nonsense"}}}},
     "output_config.format.schema"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tools": [{"name": "bad name!", "input_schema": {"type": "object"}}]}, "tools[0].name"),
    ({"thinking": {"type": "enabled", "budget_tokens": 50}}, "thinking.budget_tokens"),  # not under max_tokens
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url",
                                                                          "url": "https://example.com/a.png"}}]}]},
     "messages[0].content[0].source"),
])
def test_what_cannot_be_honoured_is_refused_by_name(qwen3: ServerThread, model: str, extra: dict, named: str):
    body = {"model": model, "max_tokens": 10, "messages": FRANCE, **extra}
    answer = httpx.post(f"{qwen3.url}/messages", json=body, headers={"x-api-key": KEY}, timeout=30)
    assert answer.status_code == 400
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(named) or f"'{named}'" in error["error"]["message"], error


def test_the_fields_claude_code_sends_are_taken(client: anthropic.Anthropic, model: str):
    # What Claude Code 2.1 sends besides messages and tools (captured from it): adaptive thinking, an effort,
    # a context-management edit, metadata, and a max_tokens far past a small model's context.
    message = client.messages.create(
        model=model, max_tokens=32000, messages=FRANCE, thinking={"type": "adaptive"},
        metadata={"user_id": '{"device_id":"d","session_id":"s"}'},
        extra_query={"beta": "true"},
        extra_body={**GREEDY, "output_config": {"effort": "high"},
                    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}})
    assert message.stop_reason in ("end_turn", "max_tokens", "model_context_window_exceeded")
    assert "".join(b.text for b in message.content if b.type == "text")


def test_output_config_format_makes_the_reply_follow_its_schema(client: anthropic.Anthropic, model: str):
    schema = {"type": "object", "properties": {"capital": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["capital", "population"], "additionalProperties": False}
    message = client.messages.create(
        model=model, max_tokens=200, messages=FRANCE,
        extra_body={**GREEDY, "output_config": {"format": {"type": "json_schema", "schema": schema}}})
    (block,) = message.content
    jsonschema.validate(json.loads(block.text), schema)


def test_an_unknown_model_is_a_404_in_anthropic_s_envelope(client: anthropic.Anthropic, model: str):
    for call in (lambda: client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=FRANCE),
                 lambda: client.messages.count_tokens(model="claude-sonnet-4-5", messages=FRANCE)):
        with pytest.raises(anthropic.NotFoundError) as caught:
            call()
        error = caught.value.body
        assert error["type"] == "error" and error["error"]["type"] == "not_found_error"
        assert model in error["error"]["message"]


def test_the_key_is_taken_as_x_api_key_and_a_wrong_one_is_refused(qwen3: ServerThread, model: str):
    assert _client(qwen3).messages.count_tokens(model=model, messages=FRANCE).input_tokens > 0
    with pytest.raises(anthropic.AuthenticationError) as caught:
        _client(qwen3, key="sk-wrong").messages.create(model=model, max_tokens=10, messages=FRANCE)
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "authentication_error"
    # x-api-key opens every route; the OpenAI API's errors keep their own shape.
    assert httpx.get(f"{qwen3.url}/models", headers={"x-api-key": KEY}, timeout=30).status_code == 200
    refused = httpx.get(f"{qwen3.url}/models", headers={"x-api-key": "sk-wrong"}, timeout=30)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{qwen3.url}/models", headers={"authorization": f"Bearer {KEY}"}, timeout=30).status_code == 200

"""Anthropic's requests as the engine's ChatMessage / SamplingParams / ReplyShape (no server, no engine)."""

from __future__ import annotations

import json

import pytest

from app.server.anthropic.content import ERROR_PREFIX
from app.server.anthropic.errors import status_and_body
from app.server.anthropic.request import parse_request
from app.server.errors import ApiError
from engine.protocol import ChatMessage, ModelInfo, ToolCall

MODEL = ModelInfo(path="/m/starter-qwen3.gguf", name="starter", architecture="llama", n_ctx=2048, n_ctx_train=8192,
                  n_params=1, size_bytes=1, has_chat_template=True, reasoning_format="qwen3", tool_format="hermes")
TOOL = {"name": "get_weather", "description": "The weather.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def parse(**fields):
    return parse_request({"model": "m", "max_tokens": 100, **fields}, MODEL)


def refused(**fields) -> str:
    with pytest.raises(ApiError) as caught:
        parse(**fields)
    assert caught.value.status == 400
    return status_and_body(caught.value)[1]["error"]["message"]


def test_a_conversation_with_a_tool_round_becomes_the_engine_s_turns():
    request = parse(system=[{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}], messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should call it.", "signature": "x"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Sunny"}]},
            {"type": "text", "text": "And tomorrow?"}]},
    ])
    assert request.messages == (
        ChatMessage("system", "Be brief.\n\nBe kind."),
        ChatMessage("user", "Weather in Paris?"),
        ChatMessage("assistant", "Let me look.", (ToolCall("toolu_1", "get_weather", '{"city": "Paris"}'),)),
        ChatMessage("tool", "Sunny", tool_call_id="toolu_1", name="get_weather"),
        ChatMessage("user", "And tomorrow?"),
    )


def test_consecutive_turns_of_a_role_are_one_and_a_tool_error_says_so():
    request = parse(messages=[
        {"role": "user", "content": "One."}, {"role": "user", "content": [{"type": "text", "text": "Two."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "boom", "is_error": True}]},
    ])
    assert [m.role for m in request.messages] == ["user", "assistant", "tool"]
    assert request.messages[0].content == "One.\n\nTwo."
    assert request.messages[2].content == ERROR_PREFIX + "boom"


def test_sampling_thinking_and_tools_become_the_engine_s_settings():
    request = parse(messages=[{"role": "user", "content": "Hi"}], temperature=0.2, top_p=0.5, top_k=7,
                    stop_sequences=["END"], thinking={"type": "enabled", "budget_tokens": 30}, tools=[TOOL],
                    tool_choice={"type": "any", "disable_parallel_tool_use": True})
    s, shape = request.sampling, request.shape
    assert (s.temperature, s.top_p, s.top_k, s.max_tokens, s.stop) == (0.2, 0.5, 7, 100, ("END",))
    assert (shape.reasoning, shape.think_budget, shape.tool_choice, shape.parallel_calls) == ("on", 30, "required",
                                                                                              False)
    assert json.loads(shape.tools)[0]["function"]["parameters"] == TOOL["input_schema"]
    assert parse(messages=[{"role": "user", "content": "Hi"}]).shape.reasoning == "off"  # no thinking unless asked
    named = parse(messages=[{"role": "user", "content": "Hi"}], tools=[TOOL],
                  tool_choice={"type": "tool", "name": "get_weather"})
    assert named.shape.tool_choice == "get_weather"


def test_max_tokens_past_the_context_is_capped_not_refused():
    request = parse_request({"model": "m", "max_tokens": 64000, "messages": [{"role": "user", "content": "Hi"}]},
                            MODEL)
    assert request.sampling.max_tokens == MODEL.n_ctx and request.max_tokens == 64000


@pytest.mark.parametrize(("fields", "named"), [
    ({"messages": [{"role": "user", "content": [{"type": "search_result"}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Sure"}]}, "messages[1]"),
    ({"messages": [{"role": "assistant", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "colour": 1}]}]},
     "messages[0].content[0].colour"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [
        {"type": "image", "source": {}}]}]}]}, "messages[0].content[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/tiff", "data": ""}}]}]}, "messages[0].content[0].source.media_type"),
    ({"messages": [{"role": "user", "content": "Hi"}], "top_k": -1}, "top_k"),
    ({"messages": [{"role": "user", "content": "Hi"}], "temperature": 1.5}, "temperature"),
    ({"messages": [{"role": "user", "content": "Hi"}], "container": "c"}, "container"),
    ({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": {"type": "any"}}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "Hi"}], "tools": [TOOL], "tool_choice": {"type": "tool", "name": "x"}},
     "tool_choice"),
    ({"messages": [{"role": "user", "content": "Hi"}], "tools": [{**TOOL, "input_examples": []}]},
     "tools[0].input_examples"),
    ({"messages": [{"role": "user", "content": "Hi"}], "thinking": {"type": "between_tools"}}, "thinking"),
])
def test_what_cannot_be_honoured_is_a_400_that_names_it(fields: dict, named: str):
    assert named in refused(**fields)


def test_max_tokens_is_required_except_to_count():
    assert "max_tokens" in refused(max_tokens=None, messages=[{"role": "user", "content": "Hi"}])
    counted = parse_request({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}, MODEL, count=True)
    assert counted.messages == (ChatMessage("user", "Hi"),)
    with pytest.raises(ApiError):  # sampling fields are not count_tokens' fields
        parse_request({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}, MODEL,
                      count=True)


@pytest.mark.parametrize(("error", "status", "kind"), [
    (ApiError(400, "bad"), 400, "invalid_request_error"),
    (ApiError(401, "key"), 401, "authentication_error"),
    (ApiError(404, "no model"), 404, "not_found_error"),
    (ApiError(413, "big"), 413, "request_too_large"),
    (ApiError(503, "busy", "server_error", None, "server_busy"), 529, "overloaded_error"),
    (ApiError(503, "no model loaded", "server_error", None, "model_not_loaded"), 503, "api_error"),
    (ApiError(500, "crash", "server_error"), 500, "api_error"),
])
def test_errors_take_anthropic_s_envelope_and_status(error: ApiError, status: int, kind: str):
    assert status_and_body(error) == (status, {"type": "error", "error": {"type": kind, "message": error.message}})

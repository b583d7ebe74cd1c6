"""OpenAI's Responses API (`POST /v1/responses`) through `tailor serve`, driven by the official `openai` client:
whole and streamed replies, function calls with Qwen3's template, reasoning with QwQ's, JSON-schema answers,
`previous_response_id` and the store, refusals by name, and a client that leaves mid-stream."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent, response_create_params
from PIL import Image
from pydantic import BaseModel, TypeAdapter

from app.server.errors import ApiError
from app.server.responses.events import ReplyEvents
from app.server.responses.output import ResponseObject
from app.server.responses.store import ResponseStore, stored
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from engine.protocol import ChatMessage, Done, GenerationStats, Token, ToolCall
from tests.app.server.conftest import format_server, served_model
from tests.app.server.test_queue_and_disconnect import wait_until
from tests.fixtures.format_models import TIME_TOOL, WEATHER_TOOL
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

SYSTEM = "You are Tailor, a helpful assistant. Reply clearly and concisely."
FRANCE = "What is the capital of France?"
STORY = "Write a very long story about a dragon who learns to bake bread."
# The chat API's tools in the Responses API's flat shape.
WEATHER = {"type": "function", **WEATHER_TOOL["function"]}
TIME = {"type": "function", **TIME_TOOL["function"]}
ASK = "What is the weather in Paris?"
BOOK = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                         "year": {"type": "integer", "minimum": 1400, "maximum": 2030}},
        "required": ["title", "year"]}


def _client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


def strict_stream(client: openai.OpenAI, **body: object) -> list[dict]:
    """A streamed response's events as sent, each validated (not merely read) as the `openai` package's type, and
    named by its type in its SSE `event:` line."""
    with httpx.stream("POST", f"{client.base_url}responses", json={**body, "stream": True}, timeout=120) as answer:
        lines = [line for line in answer.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines[0::2]]
    events = [json.loads(line.removeprefix("data: ")) for line in lines[1::2]]
    assert names == [event["type"] for event in events]
    for event in events:
        TypeAdapter(ResponseStreamEvent).validate_python(event)
    Response.model_validate(events[-1]["response"])
    return events


@pytest.fixture(scope="module")
def server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """The starter model, with a tiny projector so that it takes images too."""
    folder = tmp_path_factory.mktemp("responses")
    projector = write_tiny_projector(folder / "mmproj-gemma3.gguf", TinyProjectorSpec(projector_type="gemma3"))
    with format_server(starter_model, folder, LoadSettings(n_ctx=2048, mmproj=str(projector))) as thread:
        yield thread


@pytest.fixture(scope="module")
def client(server: ServerThread) -> openai.OpenAI:
    return _client(server)


@pytest.fixture(scope="module")
def model(client: openai.OpenAI) -> str:
    return served_model(client)


@pytest.fixture(scope="module")
def qwen3(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    """Qwen3's template (Hermes <tool_call> tools) over the starter model's weights."""
    with format_server(format_models("qwen3"), tmp_path_factory.mktemp("logs")) as thread:
        yield _client(thread)


@pytest.fixture(scope="module")
def qwq(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    """QwQ's template: its prompt opens the think block, so every reply reasons first."""
    with format_server(format_models("qwq"), tmp_path_factory.mktemp("logs")) as thread:
        yield _client(thread)


# ------------------------------------------------------------------ text, whole and streamed


def test_a_response_is_the_chat_api_s_greedy_reply(client: openai.OpenAI, model: str):
    chat = client.chat.completions.create(model=model, temperature=0, max_tokens=32, messages=[
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": FRANCE}])
    reply = client.responses.create(model=model, instructions=SYSTEM, input=FRANCE, temperature=0,
                                    max_output_tokens=32)
    assert reply.id.startswith("resp_") and reply.object == "response" and reply.status == "completed"
    assert reply.model == model and reply.completed_at is not None and reply.error is None
    (message,) = reply.output
    assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    assert message.status == "completed" and message.content[0].type == "output_text"
    assert reply.output_text == chat.choices[0].message.content and "Paris" in reply.output_text
    usage = reply.usage
    assert usage.input_tokens == chat.usage.prompt_tokens and usage.output_tokens == chat.usage.completion_tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.output_tokens_details.reasoning_tokens == 0
    # The request's fields come back in the response.
    assert reply.instructions == SYSTEM and reply.temperature == 0 and reply.max_output_tokens == 32
    # Input items (a message with input_text parts, a developer message) are the same conversation.
    items = client.responses.create(model=model, temperature=0, max_output_tokens=32, input=[
        {"role": "developer", "content": SYSTEM},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": FRANCE}]}])
    assert items.output_text == reply.output_text and items.usage.input_tokens == usage.input_tokens


def test_a_streamed_response_parses_in_the_sdk_and_matches_the_whole_one(client: openai.OpenAI, model: str):
    whole = client.responses.create(model=model, instructions=SYSTEM, input=FRANCE, temperature=0,
                                    max_output_tokens=32)
    with client.responses.stream(model=model, instructions=SYSTEM, input=FRANCE, temperature=0,
                                 max_output_tokens=32) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == final.output_text == whole.output_text
    assert events[0].response.status == "in_progress" and events[0].response.id == final.id
    assert final.status == "completed" and final.usage.output_tokens == whole.usage.output_tokens
    # The same stream through create(stream=True), and each SSE event named by its type, as OpenAI sends them.
    raw = list(client.responses.create(model=model, instructions=SYSTEM, input=FRANCE, temperature=0,
                                       max_output_tokens=32, stream=True))
    # (as many deltas or fewer: the engine sends what the detokenizer gives at once, a token or several)
    assert [e.type for e in raw if e.type != "response.output_text.delta"] == [
        kind for kind in kinds if kind != "response.output_text.delta"]
    assert "".join(e.delta for e in raw if e.type == "response.output_text.delta") == deltas
    assert strict_stream(client, model=model, instructions=SYSTEM, input=FRANCE, temperature=0,
                         max_output_tokens=32)[-1]["response"]["output"][0]["content"][0]["text"] == deltas
    whole_json = httpx.post(f"{client.base_url}responses", timeout=120, json={
        "model": model, "instructions": SYSTEM, "input": FRANCE, "temperature": 0, "max_output_tokens": 32})
    assert Response.model_validate(whole_json.json()).output_text == deltas


def test_the_output_cap_makes_an_incomplete_response(client: openai.OpenAI, model: str):
    reply = client.responses.create(model=model, input=STORY, temperature=0, max_output_tokens=5)
    assert reply.status == "incomplete" and reply.incomplete_details.reason == "max_output_tokens"
    assert reply.output[0].status == "incomplete" and reply.usage.output_tokens == 5
    events = list(client.responses.create(model=model, input=STORY, temperature=0, max_output_tokens=5, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.output[0].content[0].text == reply.output_text


# ------------------------------------------------------------------ previous_response_id and the store


def test_a_follow_up_continues_the_stored_conversation_from_a_warm_cache(client: openai.OpenAI, model: str):
    first = client.responses.create(model=model, instructions=SYSTEM, input="My name is Ada. Say hello to me.",
                                    temperature=0, max_output_tokens=24)
    follow = client.responses.create(model=model, instructions=SYSTEM, input="What is my name?",
                                     previous_response_id=first.id, temperature=0, max_output_tokens=24)
    # The same conversation sent whole: the follow-up saw the first turn and its answer, exactly.
    whole = client.responses.create(model=model, instructions=SYSTEM, temperature=0, max_output_tokens=24,
                                    store=False, input=[
                                        {"role": "user", "content": "My name is Ada. Say hello to me."},
                                        *[item.model_dump(exclude_none=True) for item in first.output],
                                        {"role": "user", "content": "What is my name?"}])
    assert follow.previous_response_id == first.id
    assert follow.usage.input_tokens == whole.usage.input_tokens > first.usage.input_tokens
    assert follow.output_text == whole.output_text
    # The first turn, prompt and answer, was still in the prefix cache: only the new turn was prefilled.
    cached = follow.usage.input_tokens_details.cached_tokens
    print(f"follow-up: {follow.usage.input_tokens} input tokens, {cached} from the cache "
          f"(the first turn: {first.usage.input_tokens} + {first.usage.output_tokens})")
    assert cached >= first.usage.input_tokens


def test_a_stored_response_is_retrieved_and_deleted(client: openai.OpenAI, model: str):
    reply = client.responses.create(model=model, input=FRANCE, temperature=0, max_output_tokens=4)
    again = client.responses.retrieve(reply.id)
    assert again.model_dump() == reply.model_dump()
    client.responses.delete(reply.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(reply.id)


def test_store_false_keeps_nothing_so_a_follow_up_is_a_404(client: openai.OpenAI, model: str):
    reply = client.responses.create(model=model, input=FRANCE, temperature=0, max_output_tokens=4, store=False)
    assert reply.output_text
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(reply.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=model, input="And Italy?", previous_response_id=reply.id, max_output_tokens=4)
    assert caught.value.body["param"] == "previous_response_id" and reply.id in caught.value.body["message"]


def test_an_unknown_previous_response_is_a_404_naming_it(client: openai.OpenAI, model: str):
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=model, input="Hello", previous_response_id="resp_nothing")
    assert caught.value.body["param"] == "previous_response_id"
    assert "resp_nothing" in caught.value.body["message"]


# ------------------------------------------------------------------ fields: honoured or refused by name

TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}
# field -> (a value that asks for something, whether the server honours it)
FIELDS = {
    "input": (FRANCE, True),
    "model": (None, True),  # the served model's name, filled in below
    "instructions": (SYSTEM, True),
    "max_output_tokens": (4, True),
    "temperature": (0.0, True),
    "top_p": (0.5, True),
    "stream": (False, True),
    "store": (False, True),
    "text": ({"format": {"type": "json_object"}}, True),
    "reasoning": ({"effort": "low", "summary": "auto"}, True),
    "tool_choice": ("none", True),
    "parallel_tool_calls": (False, True),
    "tools": ([TOOL], False),  # the starter model's template has no tools: a 400 that says so
    "previous_response_id": ("resp_unknown", False),  # a 404 naming it (tested above)
    "include": (["message.output_text.logprobs"], False),  # reasoning.encrypted_content is given (below)
    "user": ("someone", True),
    "metadata": ({"team": "docs"}, True),
    "safety_identifier": ("hash", True),
    "prompt_cache_key": ("chat-1", True),
    "prompt_cache_retention": ("24h", True),
    "prompt_cache_options": ({"mode": "implicit"}, True),
    "service_tier": ("flex", True),
    "stream_options": ({"include_obfuscation": False}, True),
    "max_tool_calls": (3, True),
    "background": (True, False),
    "background_options": ({"completion_window": "2h"}, False),
    "conversation": ("conv_1", False),
    "prompt": ({"id": "pmpt_1"}, False),
    "truncation": ("auto", False),
    "top_logprobs": (2, False),
    "context_management": ([{"type": "compaction"}], False),
    "moderation": ({"model": "omni-moderation-latest"}, False),
    "image": ({"context_compression": "enabled"}, False),
    "access_programs": ({"cyber": "standard"}, False),
}


def test_every_field_of_the_openai_package_is_decided():
    fields = {*response_create_params.ResponseCreateParamsBase.__annotations__,
              *response_create_params.ResponseCreateParamsStreaming.__annotations__}
    assert fields == set(FIELDS)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_field_is_honoured_or_refused_by_name(server: ServerThread, model: str, field: str):
    value, honoured = FIELDS[field]
    body = {"model": model, "input": FRANCE, "max_output_tokens": 4, "temperature": 0}
    body[field] = value if field != "model" else model
    answer = httpx.post(f"{server.url}/responses", json=body, timeout=60)
    if honoured:
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] in ("completed", "incomplete")
    else:
        assert answer.status_code in (400, 404), answer.text
        assert answer.json()["error"]["param"].split("[")[0] == field


def test_codex_cli_s_client_metadata_is_taken(server: ServerThread, model: str):
    # Not a field of the openai package: Codex CLI 0.171 sends its session and turn ids in it (captured).
    body = {"model": model, "input": FRANCE, "max_output_tokens": 4, "temperature": 0, "store": False,
            "client_metadata": {"thread_id": "t", "x-codex-turn-metadata": '{"turn_id": "u"}', "session_id": "t"}}
    answer = httpx.post(f"{server.url}/responses", json=body, timeout=60)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(("extra", "param"), [
    ({"top_k": 5}, "top_k"),
    ({"tools": [{"type": "namespace", "name": "agents", "description": "d", "tools": []}]}, "tools[0].tools"),
    ({"tools": [{"type": "namespace", "name": "agents", "description": "d",
                 "tools": [{"type": "web_search"}]}]}, "tools[0].tools[0]"),
    ({"tools": [{"type": "namespace", "name": "a" * 40, "description": "d",
                 "tools": [{**WEATHER, "name": "b" * 30}]}]}, "tools[0].tools[0].name"),
    ({"tools": [WEATHER, {"type": "namespace", "name": "agents", "description": "d",
                          "tools": [{**WEATHER, "name": "spawn", "parameters": {"type": "strng"}}]}]},
     "tools[1].tools[0].parameters"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]}, "input[0].content[0]"),
    ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"input": [{"type": "function_call_output", "output": "18"}]}, "input[0].call_id"),
    ({"text": {"format": {"type": "json_schema", "name": "tags", "schema": {
        "type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}}}}, "text.format.schema"),
    ({"text": {"verbosity": "low"}}, "text.verbosity"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
])
def test_what_this_server_cannot_do_is_a_400_naming_the_field(client: openai.OpenAI, model: str, extra: dict,
                                                              param: str):
    body = {"input": FRANCE, "max_output_tokens": 4, **extra}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model, **{k: v for k, v in body.items() if k != "top_k"},
                                extra_body={"top_k": extra["top_k"]} if "top_k" in extra else None)
    assert caught.value.body["param"] == param, caught.value.body


# ------------------------------------------------------------------ structured output and images


def test_a_json_schema_answer_parses_and_follows_the_schema(client: openai.OpenAI, model: str):
    reply = client.responses.create(
        model=model, temperature=0, max_output_tokens=120, input="Describe a famous book as JSON.",
        text={"format": {"type": "json_schema", "name": "book", "schema": BOOK, "strict": True}})
    assert reply.status == "completed"
    jsonschema.validate(json.loads(reply.output_text), BOOK)
    assert reply.text.format.type == "json_schema" and reply.text.format.name == "book"

    class Book(BaseModel):
        title: str
        year: int

    parsed = client.responses.parse(model=model, temperature=0, max_output_tokens=120, text_format=Book,
                                    input="Describe a famous book as JSON.")
    assert isinstance(parsed.output_parsed, Book)


def png_url(colour: tuple[int, int, int]) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (80, 60), colour).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def test_an_input_image_reaches_the_model_through_the_chat_api_s_intake(client: openai.OpenAI, model: str):
    text_only = client.responses.create(model=model, temperature=0, max_output_tokens=4,
                                        input="What is in the picture?")
    seen = client.responses.create(model=model, temperature=0, max_output_tokens=4, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "What is in the picture?"},
        {"type": "input_image", "image_url": png_url((255, 0, 0)), "detail": "auto"}]}])
    assert seen.usage.input_tokens >= text_only.usage.input_tokens + 16  # gemma3's projector: 16 positions
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model, max_output_tokens=4, input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "auto"}]}])
    assert caught.value.body["param"] == "input[0].content[0].image_url"


# ------------------------------------------------------------------ a client that leaves


def test_a_client_leaving_mid_stream_cancels_the_reply(server: ServerThread, client: openai.OpenAI, model: str):
    stream = client.responses.create(model=model, input=STORY, max_output_tokens=1500, temperature=0.7, stream=True)
    events = iter(stream)
    created = next(events)
    for _ in range(4):
        next(events)
    (request_id,) = server.engine.active
    stream.close()
    outcome = server.engine.wait_outcome(request_id, timeout=60)
    assert outcome is not None and outcome.finish_reason == "cancelled" and outcome.gen_tokens < 1500
    wait_until(lambda: not server.engine.active)
    with pytest.raises(openai.NotFoundError):  # it never finished: it was not kept
        client.responses.retrieve(created.response.id)
    after = client.responses.create(model=model, input=FRANCE, max_output_tokens=4, temperature=0)
    assert after.status in ("completed", "incomplete")


# ------------------------------------------------------------------ function calls (Qwen3's template)


def _check(call) -> dict:  # noqa: ANN001 - the openai package's function call item
    tool = {"get_weather": WEATHER, "get_time": TIME}[call.name]
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, tool["parameters"])
    return arguments


def test_a_function_call_round_trip(qwen3: openai.OpenAI):
    model = served_model(qwen3)
    first = qwen3.responses.create(model=model, input=ASK, tools=[WEATHER, TIME], tool_choice="required",
                                   parallel_tool_calls=False, temperature=0, reasoning={"effort": "none"})
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.id.startswith("fc_") and call.call_id.startswith("call_") and call.status == "completed"
    _check(call)
    assert first.status == "completed" and first.tools[0].name == "get_weather"
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "18 degrees and sunny"}
    # The result sent with the whole conversation, as a client that keeps it does...
    second = qwen3.responses.create(model=model, tools=[WEATHER, TIME], tool_choice="none", temperature=0,
                                    max_output_tokens=40, reasoning={"effort": "none"}, input=[
                                        {"role": "user", "content": ASK},
                                        *[item.model_dump(exclude_none=True) for item in first.output], result])
    # ...and after previous_response_id, as one that lets the server keep it.
    chained = qwen3.responses.create(model=model, tools=[WEATHER, TIME], tool_choice="none", temperature=0,
                                     max_output_tokens=40, reasoning={"effort": "none"}, input=[result],
                                     previous_response_id=first.id)
    alone = qwen3.responses.create(model=model, input=ASK, tools=[WEATHER, TIME], tool_choice="none",
                                   temperature=0, max_output_tokens=1, reasoning={"effort": "none"})
    assert second.output_text and [item.type for item in second.output] == ["message"]
    # The same prompt either way (their greedy replies are not compared: a warm prefix may tip a near tie).
    assert chained.usage.input_tokens == second.usage.input_tokens and chained.output_text
    # The call and its result were rendered into the prompt (as <tool_call> and <tool_response> blocks).
    assert second.usage.input_tokens > alone.usage.input_tokens + 20


NAMESPACE = {"type": "namespace", "name": "forecast", "description": "Weather services.", "tools": [WEATHER]}


def test_a_namespace_s_function_is_called_by_its_name_and_namespace_and_goes_round(qwen3: openai.OpenAI):
    # Codex CLI groups its sub-agent tools in a namespace: the model sees forecast__get_weather, the client
    # gets name and namespace apart, and gives them back so.
    model = served_model(qwen3)
    first = qwen3.responses.create(model=model, input=ASK, tools=[TIME, NAMESPACE],
                                   tool_choice={"type": "function", "name": "forecast__get_weather"},
                                   parallel_tool_calls=False, temperature=0, reasoning={"effort": "none"})
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert (call.name, call.namespace) == ("get_weather", "forecast")
    _check(call)
    streamed = strict_stream(qwen3, model=model, input=ASK, tools=[TIME, NAMESPACE], temperature=0,
                             tool_choice={"type": "function", "name": "forecast__get_weather"},
                             parallel_tool_calls=False, reasoning={"effort": "none"})
    items = [e["item"] for e in streamed if e["type"] == "response.output_item.added"]
    assert [(i["name"], i["namespace"]) for i in items] == [("get_weather", "forecast")]
    done = [e for e in streamed if e["type"] == "response.function_call_arguments.done"]
    assert [e["name"] for e in done] == ["get_weather"]
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "18 degrees and sunny"}
    given_back = [{"role": "user", "content": ASK}, call.model_dump(exclude_none=True), result]
    second = qwen3.responses.create(model=model, tools=[TIME, NAMESPACE], tool_choice="none", temperature=0,
                                    max_output_tokens=20, reasoning={"effort": "none"}, input=given_back)
    chained = qwen3.responses.create(model=model, tools=[TIME, NAMESPACE], tool_choice="none", temperature=0,
                                     max_output_tokens=20, reasoning={"effort": "none"}, input=[result],
                                     previous_response_id=first.id)
    # The same prompt either way: the call given back was qualified again as the model had made it.
    assert second.usage.input_tokens == chained.usage.input_tokens


def test_hosted_tools_are_left_out_and_the_response_says_so(qwen3: openai.OpenAI):
    model = served_model(qwen3)
    hosted = [{"type": "web_search", "external_web_access": False}, {"type": "file_search", "vector_store_ids": ["v"]}]
    raw = qwen3.responses.with_raw_response.create(model=model, input=ASK, tools=[WEATHER, *hosted], temperature=0,
                                                   max_output_tokens=4, reasoning={"effort": "none"})
    assert raw.headers["x-tailor-tools-left-out"] == "web_search, file_search"
    assert [t.type for t in raw.parse().tools] == ["function"]
    alone = qwen3.responses.create(model=model, input=ASK, tools=[WEATHER], temperature=0, max_output_tokens=4,
                                   reasoning={"effort": "none"})
    assert raw.parse().usage.input_tokens == alone.usage.input_tokens  # the model was offered the function alone
    with pytest.raises(openai.BadRequestError) as caught:  # a request that insists on one is still refused
        qwen3.responses.create(model=model, input=ASK, tools=hosted, tool_choice={"type": "web_search_preview"})
    assert caught.value.body["param"] == "tool_choice"


def test_a_streamed_call_comes_as_function_call_events(qwen3: openai.OpenAI):
    model = served_model(qwen3)
    both = "What is the weather in Paris and the time in Tokyo?"
    whole = qwen3.responses.create(model=model, input=both, tools=[WEATHER, TIME], tool_choice="required",
                                   temperature=0, reasoning={"effort": "none"})
    with qwen3.responses.stream(model=model, input=both, tools=[WEATHER, TIME], tool_choice="required",
                                temperature=0, reasoning={"effort": "none"}) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    arguments = {e.item_id: e.arguments for e in events if e.type == "response.function_call_arguments.done"}
    deltas = {e.item_id: e.delta for e in events if e.type == "response.function_call_arguments.delta"}
    calls = [item for item in final.output if item.type == "function_call"]
    assert [c.name for c in calls] == [c.name for c in whole.output if c.type == "function_call"]
    assert {c.name for c in calls} == {"get_weather", "get_time"}
    assert [a.id for a in added] == [c.id for c in calls] and all(a.arguments == "" for a in added)
    for call in calls:
        assert arguments[call.id] == deltas[call.id] == call.arguments
        _check(call)
    assert len({c.call_id for c in calls}) == len(calls)
    strict = strict_stream(qwen3, model=model, input=both, tools=[WEATHER, TIME], tool_choice="required",
                           temperature=0, reasoning={"effort": "none"})
    assert [i["type"] for i in strict[-1]["response"]["output"]] == ["function_call"] * len(calls)


def test_tools_that_are_not_functions_or_break_rules_are_refused_by_name(qwen3: openai.OpenAI):
    model = served_model(qwen3)
    cases = [
        ({"tools": [{"type": "function", "name": "bad name!", "parameters": None, "strict": None}]}, "tools[0].name"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "strng"}, "strict": None}]},
         "tools[0].parameters"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_stock"}}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": "required",
          "text": {"format": {"type": "json_object"}}}, "text.format"),
    ]
    for fields, param in cases:
        with pytest.raises(openai.BadRequestError) as caught:
            qwen3.responses.create(model=model, input=ASK, **fields)
        assert caught.value.body["param"] == param, caught.value.body
        assert "function." not in caught.value.body["message"] and "response_format" not in caught.value.body["message"]


# ------------------------------------------------------------------ reasoning (QwQ's template)


def test_the_reasoning_comes_as_a_reasoning_item_whole_and_streamed(qwq: openai.OpenAI):
    model = served_model(qwq)
    chat = qwq.chat.completions.create(model=model, temperature=0, max_tokens=60,
                                       messages=[{"role": "user", "content": STORY}])
    whole = qwq.responses.create(model=model, input=STORY, temperature=0, max_output_tokens=60)
    reasoning = whole.output[0]
    assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_") and reasoning.summary == []
    assert reasoning.content[0].type == "reasoning_text"
    assert reasoning.content[0].text == chat.choices[0].message.model_extra["reasoning_content"]
    assert whole.usage.output_tokens_details.reasoning_tokens == chat.usage.completion_tokens_details.reasoning_tokens
    assert whole.usage.output_tokens_details.reasoning_tokens > 0
    events = list(qwq.responses.create(model=model, input=STORY, temperature=0, max_output_tokens=60, stream=True))
    kinds = [e.type for e in events]
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought == reasoning.content[0].text
    strict_stream(qwq, model=model, input=STORY, temperature=0, max_output_tokens=60)
    thinking = [i for i, kind in enumerate(kinds) if kind == "response.reasoning_text.delta"]
    answering = [i for i, kind in enumerate(kinds) if kind == "response.output_text.delta"]
    assert thinking and max(thinking) < min(answering, default=len(kinds))
    streamed = events[-1].response.output[0]
    assert streamed.content == reasoning.content and streamed.status == reasoning.status
    assert [e.item.id for e in events if e.type == "response.output_item.done"][0] == streamed.id


def test_reasoning_given_back_is_accepted_and_not_sent_again(qwq: openai.OpenAI):
    model = served_model(qwq)
    first = qwq.responses.create(model=model, input="Name a colour.", temperature=0, max_output_tokens=40)
    assert first.output[0].type == "reasoning"
    turns = [item.model_dump(exclude_none=True) for item in first.output]
    asked = {"role": "user", "content": "Name another one."}
    with_reasoning = qwq.responses.create(model=model, temperature=0, max_output_tokens=1, reasoning={"effort": "none"},
                                          input=[{"role": "user", "content": "Name a colour."}, *turns, asked])
    without = qwq.responses.create(model=model, temperature=0, max_output_tokens=1, reasoning={"effort": "none"},
                                   input=[{"role": "user", "content": "Name a colour."}, *turns[1:], asked])
    assert with_reasoning.usage.input_tokens == without.usage.input_tokens


def test_a_stateless_client_gets_its_reasoning_as_encrypted_content_and_may_send_it_back(qwq: openai.OpenAI):
    """Codex CLI's way: store false, include reasoning.encrypted_content, the items sent back next turn."""
    model = served_model(qwq)
    kept = dict(model=model, input="Name a colour.", temperature=0, max_output_tokens=40, store=False,
                include=["reasoning.encrypted_content"])
    first = qwq.responses.create(**kept)
    reasoning = first.output[0]
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    assert base64.b64decode(reasoning.encrypted_content).decode() == reasoning.content[0].text
    streamed = [e for e in qwq.responses.create(**kept, stream=True) if e.type == "response.output_item.done"]
    assert streamed[0].item.encrypted_content == reasoning.encrypted_content
    plain = qwq.responses.create(model=model, input="Name a colour.", temperature=0, max_output_tokens=40)
    assert plain.output[0].type == "reasoning" and plain.output[0].encrypted_content is None  # only when asked
    follow = qwq.responses.create(model=model, temperature=0, max_output_tokens=1, store=False,
                                  reasoning={"effort": "none"}, include=["reasoning.encrypted_content"],
                                  input=[{"role": "user", "content": "Name a colour."},
                                         *[i.model_dump(exclude_none=True) for i in first.output],
                                         {"role": "user", "content": "Another?"}])
    assert follow.status in ("completed", "incomplete")


def test_reasoning_effort_none_answers_without_a_reasoning_item(qwq: openai.OpenAI):
    reply = qwq.responses.create(model=served_model(qwq), input=STORY, temperature=0, max_output_tokens=20,
                                 reasoning={"effort": "none"})
    assert [item.type for item in reply.output] == ["message"]
    assert reply.usage.output_tokens_details.reasoning_tokens == 0 and reply.reasoning.effort == "none"


# ------------------------------------------------------------------ the parts without a server

STATS = GenerationStats(ttft_s=0.1, prompt_tokens=10, cached_tokens=4, gen_tokens=5, prefill_tok_s=100.0,
                        decode_tok_s=50.0, reasoning_tokens=2)
ECHO = {"tools": [], "tool_choice": "auto", "parallel_tool_calls": True}


def _valid(events: list[dict]) -> list[str]:
    for event in events:
        TypeAdapter(ResponseStreamEvent).validate_python(event)
    return [event["type"] for event in events]


def test_whitespace_before_the_calls_is_no_message_and_a_failure_ends_the_stream():
    reply = ReplyEvents(ResponseObject("m", ECHO))
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    events = [*reply.start(), *reply.token(Token(1, "\n")), *reply.token(Token(1, " ")),
              *reply.done(Done(1, "", "tool_calls", STATS, tool_calls=(call,)))]
    kinds = _valid(events)
    assert [item["type"] for item in reply.final["output"]] == ["function_call"]
    assert "response.output_text.delta" not in kinds and kinds[-1] == "response.completed"
    usage = Response.model_validate(reply.final).usage
    assert usage.input_tokens_details.cached_tokens == 4 and usage.total_tokens == 15
    reply = ReplyEvents(ResponseObject("m", ECHO))
    events = [*reply.start(), *reply.token(Token(1, "Hel")), *reply.fail(ApiError(503, "The engine died."))]
    assert _valid(events)[-2:] == ["response.output_item.done", "response.failed"]
    failed = Response.model_validate(reply.final)
    assert failed.status == "failed" and failed.error.message == "The engine died."
    assert failed.output[0].status == "incomplete" and failed.output_text == "Hel"


def test_the_store_keeps_the_newest_within_its_count_and_bytes():
    store = ResponseStore(max_count=2, max_bytes=10_000)
    turn = (ChatMessage("user", "x" * 1000),)
    for n in range(3):
        store.put(stored({"id": f"resp_{n}"}, turn))
    assert store.get("resp_0") is None and store.get("resp_2") is not None and len(store) == 2
    store.put(stored({"id": "resp_big"}, (ChatMessage("user", "x" * 9000),)))
    assert len(store) == 1 and store.bytes <= 10_000  # the oldest went to make room
    store.put(stored({"id": "resp_huge"}, (ChatMessage("user", "x" * 20_000),)))
    assert store.get("resp_huge") is None and store.get("resp_big") is not None  # larger than the store: not kept
    assert store.delete("resp_big") and store.bytes == 0

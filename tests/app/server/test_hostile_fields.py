"""Every field of /v1/chat/completions and /v1/completions, and the parts inside them, with every kind of
JSON value: the answer is a 400 that names the field, or a 200 where the value is one the server takes;
never a 500, and the server answers the next request as before.

The server runs the starter model under Qwen3's template (tests/fixtures/format_models.py), so that tools,
tool turns and reasoning_effort reach a template that uses them. Each value is sent first under a model
name the server does not have: every field is checked before the name, so a 400 names the field and a
404 says the value passed. A value that passed is then sent to the real model (one token), unless it is
null (the field left out) or a field that changes nothing (an identifier, a cache hint: one value of each
is served); so the run stays short while every value that reaches the engine does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.server.field_policy import NO_EFFECT
from app.server.runner import ServerThread
from tests.app.server.conftest import format_server
from tests.app.server.test_request_fields import CHAT, COMPLETION
from tests.fixtures.format_models import WEATHER_TOOL

Path_ = tuple[str | int, ...]

# One of each kind of JSON value; 10**400 is valid JSON that no double holds.
VALUES: list[object] = [None, True, 0, -1, 1.5, 10**400, "", "x", [], ["x"], {"a": 1}, [[{"a": [None, {"b": []}]}]]]
NESTED = VALUES[-1]
NOT_HERE = "no-such-model"
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "Weather?"}], "name": "ann"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C"},
]
# What a nested path needs around it: the value each top-level field holds while one of its parts is fuzzed.
CONTEXT: dict[str, dict] = {
    "stream_options": {"stream": True, "stream_options": {"include_usage": True}},
    "tool_choice": {"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    "tools": {"tools": [{"type": "function", "function": {**WEATHER_TOOL["function"], "strict": False}}]},
    "response_format": {"response_format": {"type": "json_schema", "json_schema": {
        "name": "digit", "description": "one digit", "strict": True,
        "schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "integer", "minimum": 0,
                   "maximum": 9}}}},
}
CALL_AT: Path_ = ("messages", 1, "tool_calls", 0)
NESTED_CHAT: list[Path_] = [
    ("stream_options", "include_usage"),
    ("tool_choice", "type"), ("tool_choice", "function"), ("tool_choice", "function", "name"),
    ("tools", 0), ("tools", 0, "type"), ("tools", 0, "function"), *[("tools", 0, "function", key) for key in
                                                                     ("name", "description", "parameters", "strict")],
    ("tools", 0, "function", "parameters", "properties"), ("tools", 0, "function", "parameters", "required"),
    ("response_format", "type"), ("response_format", "json_schema"),
    *[("response_format", "json_schema", key) for key in ("name", "description", "strict", "schema")],
    *[("response_format", "json_schema", "schema", key) for key in ("$schema", "type", "minimum", "maximum", "enum")],
    ("messages", 0), ("messages", 0, "role"), ("messages", 0, "content"), ("messages", 0, "name"),
    ("messages", 0, "content", 0), ("messages", 0, "content", 0, "type"), ("messages", 0, "content", 0, "text"),
    ("messages", 1, "content"), ("messages", 1, "tool_calls"), CALL_AT, *[(*CALL_AT, key) for key in
                                                                         ("id", "type", "function")],
    (*CALL_AT, "function", "name"), (*CALL_AT, "function", "arguments"),
    ("messages", 2, "tool_call_id"), ("messages", 2, "name"), ("messages", 2, "content"),
]
CHAT_PATHS: list[Path_] = [(name,) for name in sorted(CHAT)] + NESTED_CHAT
COMPLETION_PATHS: list[Path_] = [(name,) for name in sorted(COMPLETION)] + [("stream_options", "include_usage")]


@pytest.fixture(scope="module")
def server(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with format_server(format_models("qwen3"), tmp_path_factory.mktemp("logs")) as thread:
        yield thread


@pytest.fixture(scope="module")
def http(server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def model(http: httpx.Client) -> str:
    return http.get("/models").json()["data"][0]["id"]


def _with(body: dict, path: Path_, value: object) -> dict:
    """A copy of `body` with the part at `path` set to `value`."""
    body = _copy(body)
    place = body
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return body


def _copy(value: object) -> object:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    return [_copy(item) for item in value] if isinstance(value, list) else value


def _field_name(path: Path_) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def _fuzz(http: httpx.Client, route: str, base: dict, path: Path_) -> None:
    field = path[0]
    assert isinstance(field, str)
    base = {**base, **CONTEXT.get(field, {})} if len(path) > 1 else base
    refused, passed = [], []
    for value in VALUES:
        body = _with(base, path, value)
        answer = http.post(route, json=body if field == "model" else {**body, "model": NOT_HERE})
        where = f"{_field_name(path)} = {str(value)[:40]}: {answer.status_code} {answer.text[:300]}"
        assert answer.status_code in (400, 404), where
        error = answer.json()["error"]
        assert error["message"], where
        if answer.status_code == 404:
            assert error["code"] == "model_not_found", where
            passed.append(body)
        else:
            assert error["param"] == field or error["param"].startswith((f"{field}.", f"{field}[")), where
            refused.append(value)
    # A field that does something is checked: some kind of value is refused by name. The rest are accepted
    # whatever they hold (identifiers, cache hints).
    assert bool(refused) == (field not in NO_EFFECT), _field_name(path)
    if field == "model":
        return
    served = [_with(base, path, NESTED)] if field in NO_EFFECT else [b for b in passed if b != _with(base, path, None)]
    for body in served:
        answer = http.post(route, json=body)
        assert answer.status_code == 200, f"{_field_name(path)}: {answer.text[:300]}"
        assert '"error"' not in answer.text, answer.text  # a streamed reply that failed after its status
    assert http.get("/models").json()["data"], "the server lost its model"


@pytest.mark.parametrize("path", CHAT_PATHS, ids=_field_name)
def test_every_chat_field_with_every_json_value_is_named_or_served(http: httpx.Client, model: str, path: Path_):
    messages = MESSAGES if path[0] == "messages" else [{"role": "user", "content": "Hi"}]
    base = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0, "stop": ["\n", "."],
            "reasoning_effort": "none"}
    _fuzz(http, "/chat/completions", base, path)


@pytest.mark.parametrize("path", COMPLETION_PATHS, ids=_field_name)
def test_every_completion_field_with_every_json_value_is_named_or_served(http: httpx.Client, model: str,
                                                                         path: Path_):
    base = {"model": model, "prompt": "The capital of France is", "max_tokens": 1, "temperature": 0,
            "stop": ["\n", "."]}
    _fuzz(http, "/completions", base, path)


@pytest.mark.parametrize(("path", "value", "message"), [
    (("reasoning_effort",), ["low"], "'reasoning_effort' must be none, minimal, low, medium or high."),
    (("reasoning_effort",), {"effort": "low"}, "'reasoning_effort' must be none, minimal, low, medium or high."),
    (("tool_choice", "function"), "get_weather", "'tool_choice' must be none, auto, required or"),
    (("tool_choice", "function"), ["get_weather"], "'tool_choice' must be none, auto, required or"),
])
def test_the_reported_shapes_are_400_naming_the_field(http: httpx.Client, model: str, path: Path_, value: object,
                                                       message: str):
    base = {"model": model, "messages": MESSAGES, "max_tokens": 1, **CONTEXT.get(str(path[0]), {})}
    answer = http.post("/chat/completions", json=_with(base, path, value))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == path[0]
    assert answer.json()["error"]["message"].startswith(message)


def _schema_body(model: str, schema: dict) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "Pick a number."}], "max_tokens": 8,
            "temperature": 0, "reasoning_effort": "none",
            "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}}


@pytest.mark.parametrize("bound", [10**300, 1e300])
def test_integer_bounds_of_300_digits_answer_a_number_in_range(http: httpx.Client, model: str, bound: float):
    # Such bounds once made a grammar of 600 alternatives: ~120 ms a token, and the batch beside it slowed 3x.
    answer = http.post("/chat/completions", json=_schema_body(model, {"type": "integer", "minimum": -bound,
                                                                      "maximum": bound}))
    assert answer.status_code == 200, answer.text
    number = json.loads(answer.json()["choices"][0]["message"]["content"])
    assert isinstance(number, int) and abs(number) < 10**16


def test_an_integer_range_past_16_digits_is_refused_naming_the_schema_path(http: httpx.Client, model: str):
    answer = http.post("/chat/completions", json=_schema_body(model, {"type": "integer", "minimum": 1e20}))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "response_format.json_schema.schema"
    assert error["message"] == ("response_format.json_schema.schema: 'minimum' 1e+20 (at #) is not supported: integers "
                                "have at most 16 digits in structured output (up to 9,999,999,999,999,999 either "
                                "side of 0)")
    tool = {"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "maximum": -(10**300)}}}}}
    body = {"model": model, "messages": [{"role": "user", "content": "Pick."}], "tools": [tool],
            "tool_choice": "required"}
    answer = http.post("/chat/completions", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "tools[0].function.parameters"
    assert "'maximum' -1000000000" in answer.json()["error"]["message"]
    assert "(at #/properties/n) is not supported: integers have at most 16 digits" in answer.json()["error"]["message"]


@pytest.mark.parametrize(("number", "param", "message"), [
    (b"1e400", "temperature", "'temperature' is a number too large for a double (over 1.8e308)."),
    (b"-1e400", "temperature", "'temperature' is a number too large for a double (over 1.8e308)."),
    (b"NaN", None, "The request body is not valid JSON."),  # Python's parser takes these words; JSON has none
    (b"Infinity", None, "The request body is not valid JSON."),
])
def test_numbers_no_double_holds_are_400(http: httpx.Client, model: str, number: bytes, param: str | None,
                                          message: str):
    raw = b'{"model": "%s", "messages": [{"role": "user", "content": "Hi"}], "temperature": %s}' % (model.encode(),
                                                                                                   number)
    answer = http.post("/chat/completions", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert (answer.json()["error"]["param"], answer.json()["error"]["message"]) == (param, message)

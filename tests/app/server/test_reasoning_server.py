"""Reasoning and JSON-schema answers through `tailor serve` with the official `openai` client: the
starter model's weights under QwQ's real template (its prompt opens the think block), on a server of
their own. `reasoning_content` beside `content`, as llama-server and LM Studio send it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from app.server.runner import ServerThread
from tests.app.server.conftest import format_server, served_model

STORY = [{"role": "user", "content": "Write a short story about a dragon who bakes bread."}]
BOOK = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                         "year": {"type": "integer", "minimum": 1400, "maximum": 2030}},
        "required": ["title", "year"]}


@pytest.fixture(scope="module")
def server(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with format_server(format_models("qwq"), tmp_path_factory.mktemp("logs")) as thread:
        yield thread


@pytest.fixture
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


def test_the_reasoning_comes_beside_the_content_and_is_counted(client: openai.OpenAI):
    reply = client.chat.completions.create(model=served_model(client), messages=STORY, temperature=0, max_tokens=60)
    message = reply.choices[0].message
    reasoning = message.model_extra["reasoning_content"]
    assert reasoning and "<think>" not in reasoning
    assert reply.usage.completion_tokens_details.reasoning_tokens > 0
    assert reply.usage.completion_tokens_details.reasoning_tokens <= reply.usage.completion_tokens


def test_reasoning_streams_as_delta_reasoning_content_before_the_answer(client: openai.OpenAI, server):
    # A budget is not OpenAI's: reasoning_effort none closes the block at once, so the answer comes.
    whole = client.chat.completions.create(model=served_model(client), messages=STORY, temperature=0, max_tokens=60)
    kinds, reasoning = [], ""
    for chunk in client.chat.completions.create(model=served_model(client), messages=STORY, temperature=0, max_tokens=60,
                                                stream=True):
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        thought = (delta.model_extra or {}).get("reasoning_content")
        if thought:
            kinds.append("reasoning")
            reasoning += thought
        if delta.content:
            kinds.append("content")
    assert kinds and kinds[0] == "reasoning"
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")
    assert reasoning == whole.choices[0].message.model_extra["reasoning_content"]


def test_reasoning_effort_none_answers_without_thinking(client: openai.OpenAI):
    reply = client.chat.completions.create(model=served_model(client), messages=STORY, temperature=0, max_tokens=30,
                                           reasoning_effort="none")
    assert reply.choices[0].message.content
    assert not (reply.choices[0].message.model_extra or {}).get("reasoning_content")
    assert reply.usage.completion_tokens_details.reasoning_tokens == 0


def test_a_json_schema_answer_parses_and_follows_the_schema(client: openai.OpenAI):
    reply = client.chat.completions.create(
        model=served_model(client), temperature=0, max_tokens=120, reasoning_effort="none",
        messages=[{"role": "user", "content": "Describe a famous book as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "book", "schema": BOOK, "strict": True}})
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content), BOOK)


class _Ended(Exception):
    """The text ended inside the JSON value, everything before being valid."""


class _JsonPrefix:
    """Reads JSON that may stop anywhere (RFC 8259): ValueError at the first character no JSON text has there."""

    SPACE, DIGITS, HEX = " \t\n\r", "0123456789", "0123456789abcdefABCDEF"
    LITERALS = {"t": "true", "f": "false", "n": "null"}

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def peek(self) -> str:
        if self.i == len(self.text):
            raise _Ended
        return self.text[self.i]

    def take(self, allowed: str | None = None) -> str:
        char = self.peek()
        if allowed is not None and char not in allowed:
            raise ValueError(f"{char!r} at {self.i}, where only one of {allowed!r} may come")
        self.i += 1
        return char

    def maybe(self, chars: str) -> bool:
        """Past one of `chars` if it comes next; whether it did (not at the end of the text)."""
        if self.i < len(self.text) and self.text[self.i] in chars:
            self.i += 1
            return True
        return False

    def skip(self, chars: str) -> None:
        while self.maybe(chars):
            pass

    def value(self) -> None:
        char = self.peek()
        if char in "{[":
            self.container()
        elif char == '"':
            self.string()
        elif char in "-" + self.DIGITS:
            self.number()
        elif char in self.LITERALS:
            for letter in self.LITERALS[char]:
                self.take(letter)
        else:
            raise ValueError(f"{char!r} at {self.i}, where a value should start")

    def container(self) -> None:
        close = "}" if self.take() == "{" else "]"
        self.skip(self.SPACE)
        if self.maybe(close):
            return
        while True:
            if close == "}":  # a member: "key": value
                self.string()
                self.skip(self.SPACE)
                self.take(":")
                self.skip(self.SPACE)
            self.value()
            self.skip(self.SPACE)
            if self.take("," + close) == close:
                return
            self.skip(self.SPACE)

    def string(self) -> None:
        self.take('"')
        while (char := self.take()) != '"':
            if char == "\\":
                if self.take('"\\/bfnrtu') == "u":
                    for _ in range(4):
                        self.take(self.HEX)
            elif char < " ":
                raise ValueError(f"control character {char!r} in a string at {self.i - 1}")

    def number(self) -> None:
        self.maybe("-")
        if self.take(self.DIGITS) != "0":
            self.skip(self.DIGITS)
        if self.maybe("."):
            self.take(self.DIGITS)
            self.skip(self.DIGITS)
        if self.maybe("eE"):
            self.maybe("+-")
            self.take(self.DIGITS)
            self.skip(self.DIGITS)


def is_json_object_prefix(text: str) -> bool:
    """Whether `text` is the start (or the whole) of a JSON object text: what a reply cut short may be."""
    reader = _JsonPrefix(text)
    try:
        reader.skip(reader.SPACE)
        if reader.peek() != "{":
            return False
        reader.value()
        reader.skip(reader.SPACE)
    except _Ended:
        return True
    except ValueError:
        return False
    return reader.i == len(text)


@pytest.mark.parametrize(("text", "prefix"), [
    ('\n\n{\n  "name": "Felix",\n  "age": 2', True),
    ('{"a": [1, -2.5e+3, {"b": "x\\u00e9\\n"}], "c": tr', True),
    ('{"a": "x\\u00', True),
    ('{"a": 1.', True),
    ('{"a": -', True),
    ("", True),
    ('{"a": {}, "b": []}', True),
    ('{"a": 1}}', False),
    ('{"a": 1} x', False),
    ('["a"', False),
    ('"a"', False),
    ('{"a" 1', False),
    ('{"a": tx', False),
    ('{"a": 01', False),
    ('{"a": 1.e', False),
    ('{"a": "\\x', False),
    ('{"a": "\\u00g', False),
    ('{"a": "line\nbreak"', False),
    ('{"a": 1,}', False),
    ("{'a': 1", False),
])
def test_the_json_object_prefix_check(text: str, prefix: bool):
    """The check below tells a cut object from anything else (it has no server: the fixture is not used)."""
    assert is_json_object_prefix(text) is prefix


def test_json_object_mode_gives_an_object(client: openai.OpenAI):
    reply = client.chat.completions.create(
        model=served_model(client), temperature=0, max_tokens=80, reasoning_effort="none",
        messages=[{"role": "user", "content": "Give me a JSON object describing a cat, with three short fields."}],
        response_format={"type": "json_object"})
    content = reply.choices[0].message.content
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)
    else:  # cut at max_tokens (the starter model rambles): the opening of an object, valid as far as it goes
        assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 80
        assert content.lstrip().startswith("{")
        assert is_json_object_prefix(content), content


@pytest.mark.parametrize(("schema", "words"), [
    ({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 3}}}, "multipleOf"),
    ({"type": "strng"}, "not a valid"),
    ({"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]}, "recurses"),
])
def test_a_schema_that_cannot_be_followed_is_a_400(server: ServerThread, client, schema: dict, words: str):
    answer = httpx.post(f"{server.url}/chat/completions", timeout=30, json={
        "model": served_model(client), "messages": STORY,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "response_format.json_schema.schema"
    assert words in error["message"]

"""Every field of the `openai` package's request types is honoured or refused by name, never dropped.

The tables below give each field a value that asks for something: a 200 means the server does it
(other tests check what it does), a 400 names the field. A field the package has and the tables
do not fails the first tests, so a new field of OpenAI's API is decided on, not ignored.
"""

from __future__ import annotations

import httpx
import pytest
from openai.types import completion_create_params as completion_params
from openai.types.chat import completion_create_params as chat_params

from app.server.runner import ServerThread
from tests.app.server.conftest import FRANCE, MODEL

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

# field -> (a value that asks for something, whether the server honours it)
CHAT = {
    "messages": (FRANCE, True),
    "model": (MODEL, True),
    "max_tokens": (4, True),
    "max_completion_tokens": (4, True),
    "temperature": (0.0, True),
    "top_p": (0.5, True),
    "seed": (7, True),
    "stop": (["\n\n"], True),
    "stream": (False, True),
    "stream_options": ({"include_usage": True}, True),
    "n": (2, False),
    "logprobs": (True, False),
    "top_logprobs": (2, False),
    "response_format": ({"type": "json_object"}, True),
    "reasoning_effort": ("low", True),
    "tool_choice": ("none", True),
    "parallel_tool_calls": (False, True),
    "tools": ([TOOL], False),  # the starter model's template has no tools: a 400 that says so
    "user": ("someone", True),
    "metadata": ({"team": "docs"}, True),
    "safety_identifier": ("hash", True),
    "prompt_cache_key": ("chat-1", True),
    "prompt_cache_retention": ("24h", True),
    "prompt_cache_options": ({}, True),
    "service_tier": ("flex", True),
    "frequency_penalty": (0.5, False),
    "presence_penalty": (0.5, False),
    "logit_bias": ({"42": -100}, False),
    "store": (True, False),
    "modalities": (["text", "audio"], False),
    "audio": ({"voice": "alloy", "format": "wav"}, False),
    "verbosity": ("low", False),
    "prediction": ({"type": "content", "content": "Paris"}, False),
    "web_search_options": ({}, False),
    "functions": ([{"name": "f"}], False),
    "function_call": ("auto", False),
    "moderation": ({}, False),
}
COMPLETION = {
    "prompt": ("The capital of France is", True),
    "model": (MODEL, True),
    "max_tokens": (4, True),
    "temperature": (0.0, True),
    "top_p": (0.5, True),
    "seed": (7, True),
    "stop": (["\n"], True),
    "stream": (False, True),
    "stream_options": ({"include_usage": True}, True),
    "echo": (True, True),
    "user": ("someone", True),
    "n": (2, False),
    "best_of": (2, False),
    "logprobs": (1, False),
    "suffix": ("!", False),
    "frequency_penalty": (0.5, False),
    "presence_penalty": (0.5, False),
    "logit_bias": ({"42": -100}, False),
}


def _fields(params) -> set[str]:  # noqa: ANN001 - one of the package's params modules
    """Every field of a request type: its base's and `stream`, which its two variants add."""
    return {*params.CompletionCreateParamsBase.__annotations__, *params.CompletionCreateParamsStreaming.__annotations__}


def test_every_chat_field_of_the_openai_package_is_decided():
    assert _fields(chat_params) == set(CHAT)


def test_every_completion_field_of_the_openai_package_is_decided():
    assert _fields(completion_params) == set(COMPLETION)


def _post(server: ServerThread, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=60)


@pytest.mark.parametrize("field", sorted(CHAT))
def test_a_chat_field_is_honoured_or_refused_by_name(server: ServerThread, field: str):
    value, honoured = CHAT[field]
    body = {"model": MODEL, "messages": FRANCE, "max_tokens": 4, "temperature": 0, field: value}
    answer = _post(server, "/chat/completions", body)
    if honoured:
        assert answer.status_code == 200, answer.text
    else:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == field


@pytest.mark.parametrize("field", sorted(COMPLETION))
def test_a_completion_field_is_honoured_or_refused_by_name(server: ServerThread, field: str):
    value, honoured = COMPLETION[field]
    body = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0, field: value}
    answer = _post(server, "/completions", body)
    if honoured:
        assert answer.status_code == 200, answer.text
    else:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == field


def test_the_neutral_value_of_a_refused_field_is_accepted(server: ServerThread):
    body = {"model": MODEL, "messages": FRANCE, "max_tokens": 4, "frequency_penalty": 0, "presence_penalty": 0.0,
            "logit_bias": {}, "store": False, "modalities": ["text"], "n": 1, "logprobs": False}
    assert _post(server, "/chat/completions", body).status_code == 200


def test_a_field_openai_does_not_have_is_refused_by_name(server: ServerThread):
    answer = _post(server, "/chat/completions", {"model": MODEL, "messages": FRANCE, "top_k": 5})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "top_k"
    assert "not a field this server knows" in answer.json()["error"]["message"]


def test_tools_on_a_template_without_them_say_so(server: ServerThread):
    answer = _post(server, "/chat/completions", {"model": MODEL, "messages": FRANCE, "tools": [TOOL]})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "This model's chat template has no tool support."

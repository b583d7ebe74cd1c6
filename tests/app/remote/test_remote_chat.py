"""Chatting with remote OpenAI-compatible servers: llama-cpp-python's, Tailor's, and broken ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.main import main
from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from app.server.runner import ServerThread
from engine.protocol import ChatMessage, Done, Error, Event, Loaded, SamplingParams, Token
from tests.app.remote.conftest import LLAMA_ALIAS
from tests.fixtures.bad_openai_server import BadOpenAIServer
from tests.fixtures.range_server import serving

FRANCE = [
    ChatMessage("system", "You are Tailor, a helpful assistant. Reply clearly and concisely."),
    ChatMessage("user", "What is the capital of France?"),
]
GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)


def reply(engine: RemoteEngine, messages=FRANCE, sampling=GREEDY) -> tuple[str, Done | Error]:
    request_id = engine.generate(messages, sampling)
    events = list(engine.stream(request_id))
    text = "".join(e.text for e in events if isinstance(e, Token))
    return text, events[-1]


def loaded(engine: RemoteEngine) -> Event:
    engine.load()
    return engine.next_event(timeout=30)


@pytest.fixture
def bad_server() -> Iterator[BadOpenAIServer]:
    with serving(BadOpenAIServer()) as server:
        yield server


def test_chat_with_llama_cpp_python_server(llama_server: str):
    engine = RemoteEngine(RemoteEndpoint(llama_server, LLAMA_ALIAS))
    try:
        assert isinstance(loaded(engine), Loaded)
        text, end = reply(engine)
        assert isinstance(end, Done), end
        assert "Paris" in text and end.text == text
        assert end.stats.gen_tokens > 0  # llama-cpp-python's server sends no usage: chunks are counted
    finally:
        engine.shutdown()


def test_chat_with_tailor_server(tailor_server: ServerThread):
    engine = RemoteEngine(RemoteEndpoint(tailor_server.url, "SmolLM2-135M-Instruct.Q4_1", "tailor-key"))
    try:
        assert isinstance(loaded(engine), Loaded)
        text, end = reply(engine)
        assert isinstance(end, Done) and "Paris" in text and end.text == text
        assert end.stats.prompt_tokens > 10 and end.stats.gen_tokens > 0  # from the usage chunk
    finally:
        engine.shutdown()


def test_wrong_key_and_unknown_model_are_clear(tailor_server: ServerThread, llama_server: str):
    engine = RemoteEngine(RemoteEndpoint(tailor_server.url, "SmolLM2-135M-Instruct.Q4_1", "wrong"))
    error = loaded(engine)
    assert isinstance(error, Error) and "401" in error.message and "API key" in error.message
    engine = RemoteEngine(RemoteEndpoint(llama_server, "llama-70b"))
    error = loaded(engine)
    assert isinstance(error, Error) and "llama-70b" in error.message and LLAMA_ALIAS in error.message


def test_cancel_stops_a_remote_reply(llama_server: str):
    engine = RemoteEngine(RemoteEndpoint(llama_server, LLAMA_ALIAS))
    story = [ChatMessage("user", "Write a very long story about a dragon who learns to bake bread.")]
    request_id = engine.generate(story, SamplingParams(max_tokens=1500))
    events = engine.stream(request_id)
    assert isinstance(next(events), Token)
    engine.cancel(request_id)
    rest = list(events)
    assert isinstance(rest[-1], Done) and rest[-1].finish_reason == "cancelled"
    assert rest[-1].stats.gen_tokens < 1500
    engine.shutdown()


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("boom", ["500", "CUDA out of memory"]),
        ("html", ["502", "Bad Gateway"]),
        ("garbage", ["malformed", "not JSON"]),
        ("deep", ["malformed", "not JSON"]),  # nested past Python's recursion limit
        ("bad_shape", ["malformed", "choices are not a list"]),
        ("cut", ["malformed", "[DONE]"]),
        ("midway", ["mid-reply", "fell off the bus"]),
    ],
)
def test_remote_failures_become_one_clear_error(bad_server: BadOpenAIServer, model: str, words: list[str]):
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, model))
    _text, end = reply(engine)
    assert isinstance(end, Error) and end.kind == "remote"
    assert bad_server.url.removesuffix("/v1") in end.message
    for word in words:
        assert word in end.message


def test_a_silent_server_times_out(bad_server: BadOpenAIServer):
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, "silent", read_timeout_s=0.5))
    _text, end = reply(engine)
    assert isinstance(end, Error) and "stopped answering" in end.message


def test_cancel_reaches_a_silent_server(bad_server: BadOpenAIServer):
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, "silent"))
    request_id = engine.generate(FRANCE, GREEDY)
    events = engine.stream(request_id)
    engine.cancel(request_id)  # before or after the response opened: the reply ends cancelled
    end = list(events)[-1]
    assert isinstance(end, Done) and end.finish_reason == "cancelled"


def test_unreachable_server(tmp_path: Path):
    engine = RemoteEngine(RemoteEndpoint("http://127.0.0.1:9/v1", "x"))
    error = loaded(engine)
    assert isinstance(error, Error) and "cannot be reached" in error.message


def test_cli_chat_with_an_endpoint(llama_server: str, capsys: pytest.CaptureFixture[str]):
    argv = ["chat", "What is the capital of France?", "--endpoint", llama_server.removesuffix("/v1"),
            "--model", LLAMA_ALIAS, "--temperature", "0", "--max-tokens", "24", "--json"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Paris" in out and '"gen_tokens"' in out


def test_cli_picks_the_only_model_and_reports_errors(tailor_server: ServerThread, bad_server: BadOpenAIServer,
                                                     capsys: pytest.CaptureFixture[str]):
    argv = ["chat", "Hi", "--endpoint", tailor_server.url, "--api-key", "tailor-key", "--max-tokens", "4"]
    assert main(argv) == 0
    assert main(["chat", "Hi", "--endpoint", bad_server.url, "--model", "boom"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tailor: error:") and "500" in err and "Traceback" not in err
    assert main(["chat", "Hi", "--endpoint", bad_server.url]) == 1
    assert "--model" in capsys.readouterr().err

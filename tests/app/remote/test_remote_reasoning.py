"""A remote reasoning model's thinking (`reasoning_content`, vLLM's `reasoning`) comes apart from its
answer and is counted, in the engine's events and in `tailor chat`, as a local reasoning model's does.

The server is tests/fixtures/bad_openai_server.py: `thinks` streams as DeepSeek and llama-server do and
reports the reasoning tokens in its usage (`thinks_zero` reports 0 of them); `thinks_uncounted` uses
vLLM's field, puts the last thought and the first answer piece in one delta, and reports no usage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.cli.main import main
from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from engine.protocol import ChatMessage, Done, SamplingParams, Token
from tests.fixtures.bad_openai_server import ANSWER, THOUGHT, THOUGHT_TOKENS, BadOpenAIServer
from tests.fixtures.range_server import serving

# (model, the reasoning tokens the stats give): the server's own count, else one per piece that came (also
# where the server says 0 beside the reasoning it sent).
COUNTS = [("thinks", THOUGHT_TOKENS), ("thinks_zero", len(THOUGHT)), ("thinks_uncounted", len(THOUGHT))]


@pytest.fixture
def bad_server() -> Iterator[BadOpenAIServer]:
    with serving(BadOpenAIServer()) as server:
        yield server


@pytest.mark.parametrize(("model", "thought_tokens"), COUNTS)
def test_remote_reasoning_streams_apart_from_the_answer_and_is_counted(
        bad_server: BadOpenAIServer, model: str, thought_tokens: int):
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, model))
    try:
        request_id = engine.generate([ChatMessage("user", "Capital of France?")],
                                     SamplingParams(max_tokens=64))
        events = list(engine.stream(request_id))
    finally:
        engine.shutdown()
    *tokens, end = events
    assert all(isinstance(t, Token) for t in tokens)
    assert [(t.text, t.reasoning) for t in tokens] == (
        [(t, True) for t in THOUGHT] + [(a, False) for a in ANSWER])  # all of the thinking first, in order
    assert isinstance(end, Done) and end.finish_reason == "stop"
    assert (end.text, end.reasoning, end.reasoning_closed) == ("".join(ANSWER), "".join(THOUGHT), True)
    assert end.stats.reasoning_tokens == thought_tokens
    figures = end.stats.as_dict()
    assert figures["reasoning_tokens"] == thought_tokens and figures["reasoning_s"] >= 0


@pytest.mark.parametrize(("model", "thought_tokens"), COUNTS)
def test_cli_writes_remote_reasoning_to_stderr_and_counts_it(
        bad_server: BadOpenAIServer, model: str, thought_tokens: int, capsys: pytest.CaptureFixture[str]):
    assert main(["chat", "Capital of France?", "--endpoint", bad_server.url, "--model", model, "--json"]) == 0
    out, err = capsys.readouterr()
    answer, stats = out.splitlines()
    assert answer == "".join(ANSWER)  # the answer alone on stdout, as with a local model
    assert err == "".join(THOUGHT)  # the thinking on stderr, as the local engine's is written
    assert json.loads(stats)["reasoning_tokens"] == thought_tokens

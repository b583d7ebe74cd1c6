"""A remote server under someone else's control cannot exhaust this machine or hang a reply.

Each case is a real HTTP server on loopback (tests/fixtures/bad_openai_server.py) answering one
way that never ends; each test asserts the one clear outcome, that the client hung up, and what
the client took: the body bytes it read off the socket, and its peak memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from app.cli.main import main
from app.remote.bounded_http import MAX_ERROR_BODY, MAX_JSON_BODY
from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from app.remote.reply_guard import TAIL_EVENTS
from app.remote.sse_reader import MAX_EVENT_BYTES
from engine.protocol import ChatMessage, Done, Error, Event, SamplingParams, Token
from tests.app.remote.measure import CountingTransport, peak_memory
from tests.fixtures.bad_openai_server import USAGE, BadOpenAIServer, _chunk
from tests.fixtures.range_server import serving

HELLO = [ChatMessage("user", "Hello?")]
READ = 64 << 10  # the most one socket read brings in (httpcore's read size)
HANG_UP_S = 30  # deadline for the server to see the client close (it is at once; the margin is for load)
IDLE_S = 0.3  # the tests' idle limit
DRIP_S = 0.02  # the dripping server's pace: its 200 bytes take 4 s
DEADLINE_S = 1.0  # the tests' read timeout, which is also the longest a capped body is read for


@pytest.fixture
def bad_server() -> Iterator[BadOpenAIServer]:
    with serving(BadOpenAIServer()) as server:
        yield server


def ask(server: BadOpenAIServer, model: str, max_tokens: int = 64, **endpoint: float) -> tuple[list[Event], int, int]:
    """The events of one reply, the body bytes the client read, and its peak memory."""
    transport = CountingTransport()
    engine = RemoteEngine(RemoteEndpoint(server.url, model, **endpoint), transport=transport)
    try:
        request_id = engine.generate(HELLO, SamplingParams(max_tokens=max_tokens))
        events, peak = peak_memory(lambda: list(engine.stream(request_id)))
    finally:
        engine.shutdown()
    return events, transport.body_bytes, peak


def test_an_endless_error_answer_is_read_up_to_its_cap(bad_server: BadOpenAIServer):
    events, read, peak = ask(bad_server, "endless_error")
    end = events[-1]
    assert isinstance(end, Error) and end.kind == "remote"
    assert "answered 500" in end.message and "Internal Server Error" in end.message
    assert "went on past 64 KiB" in end.message and len(end.message) < 600
    assert read <= MAX_ERROR_BODY + READ
    assert peak < 4 << 20
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_an_error_answer_that_drips_is_cut_at_the_deadline_and_called_slow(bad_server: BadOpenAIServer):
    bad_server.drip_s = DRIP_S
    events, read, _peak = ask(bad_server, "drip_error", read_timeout_s=DEADLINE_S)
    end = events[-1]
    assert isinstance(end, Error) and end.kind == "remote" and "answered 500" in end.message
    slow = re.search(r"\(its error reply came too slowly: (\d+) bytes in ([\d.]+) s; "
                     r"the rest was not read\)$", end.message)
    assert slow is not None, end.message
    assert "went on past" not in end.message
    assert int(slow[1]) == read < bad_server.drip_bytes  # cut before the body's end; what came, it read
    assert float(slow[2]) >= DEADLINE_S
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_a_model_list_that_drips_is_cut_at_the_deadline_and_called_slow(bad_server: BadOpenAIServer):
    bad_server.drip_models, bad_server.drip_s = True, DRIP_S
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, "ok", read_timeout_s=DEADLINE_S))
    try:
        engine.load()
        error = engine.next_event(timeout=HANG_UP_S)
    finally:
        engine.shutdown()
    assert isinstance(error, Error) and error.kind == "invalid_model"
    slow = re.search(r"answered /models too slowly: (\d+) bytes in ([\d.]+) s; the rest was not read\.$",
                     error.message)
    assert slow is not None, error.message
    assert "more than" not in error.message and int(slow[1]) < bad_server.drip_bytes
    assert bad_server.hung_up.wait(HANG_UP_S)


@pytest.mark.parametrize("model", ["huge_line", "huge_event"])
def test_an_event_that_never_ends_is_refused_at_its_cap(bad_server: BadOpenAIServer, model: str):
    events, read, peak = ask(bad_server, model)
    end = events[-1]
    assert isinstance(end, Error) and end.kind == "remote"
    assert "malformed stream" in end.message and "longer than 8 MiB" in end.message
    assert read <= MAX_EVENT_BYTES + 2 * READ
    assert peak < 2 * MAX_EVENT_BYTES  # the event being read, and what grows it
    assert bad_server.hung_up.wait(HANG_UP_S)


@pytest.mark.parametrize("model", ["empty_data", "pings"])
def test_keep_alives_without_a_token_end_at_the_idle_limit(bad_server: BadOpenAIServer, model: str):
    bad_server.endless_bytes = 16 << 20  # far more than IDLE_S lets through; a client without the limit ends sooner
    events, _read, peak = ask(bad_server, model, idle_timeout_s=IDLE_S)
    end = events[-1]
    assert isinstance(end, Error) and end.kind == "remote"
    assert f"sent no token for {IDLE_S:g} s" in end.message and bad_server.url.removesuffix("/v1") in end.message
    assert peak < 4 << 20  # read for as long as the limit, kept none of it
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_a_server_that_ignores_max_tokens_is_stopped_at_it(bad_server: BadOpenAIServer):
    events, read, peak = ask(bad_server, "endless_tokens", max_tokens=100)
    end = events[-1]
    tokens = [e for e in events if isinstance(e, Token)]
    assert isinstance(end, Done) and end.finish_reason == "length"
    assert len(tokens) == 100 and end.text == "tok " * 100 and end.stats.gen_tokens == 100
    assert read <= 101 * len(_chunk("tok ")) + READ
    assert peak < 4 << 20
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_events_after_the_last_token_are_read_a_few_at_most(bad_server: BadOpenAIServer):
    # After max_tokens the client reads on briefly for the finish and usage a correct server sends next.
    events, read, peak = ask(bad_server, "then_empty", max_tokens=5)
    end = events[-1]
    assert isinstance(end, Done) and end.finish_reason == "length" and end.text == "tok " * 5
    assert read <= (5 + TAIL_EVENTS + 1) * len(_chunk("tok ")) + READ
    assert peak < 4 << 20
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_silence_after_the_last_token_ends_the_reply_as_length_limited(bad_server: BadOpenAIServer):
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, "then_silent", read_timeout_s=600))
    try:
        request_id = engine.generate(HELLO, SamplingParams(max_tokens=5))
        events = [engine.next_event(timeout=HANG_UP_S) for _ in range(6)]  # (None past the deadline)
    finally:
        engine.shutdown()
    end = events[-1]
    assert isinstance(end, Done) and end.request_id == request_id
    assert end.finish_reason == "length" and end.text == "tok " * 5
    assert not bad_server.release.is_set()  # the client let go, not the server


def test_usage_after_the_last_token_is_kept(bad_server: BadOpenAIServer):
    events, _read, _peak = ask(bad_server, "ok", max_tokens=2)  # "Hel", "lo": the limit, then finish and usage
    end = events[-1]
    assert isinstance(end, Done) and end.text == "Hello" and end.finish_reason == "stop"
    details = USAGE["prompt_tokens_details"]
    assert (end.stats.prompt_tokens, end.stats.cached_tokens, end.stats.gen_tokens) == (
        USAGE["prompt_tokens"], details["cached_tokens"], USAGE["completion_tokens"])


@pytest.mark.parametrize("model", ["no_usage", "bad_usage"])
def test_counts_a_server_does_not_give_are_unknown(bad_server: BadOpenAIServer, model: str):
    events, _read, _peak = ask(bad_server, model)
    end = events[-1]
    assert isinstance(end, Done) and end.text == "Hello"
    assert end.stats.prompt_tokens is None and end.stats.cached_tokens is None
    assert end.stats.gen_tokens == 2  # the pieces that came, counted here
    assert end.stats.as_dict()["prompt_tokens"] is None


def test_cli_json_says_null_for_unknown_counts(bad_server: BadOpenAIServer, capsys: pytest.CaptureFixture[str]):
    assert main(["chat", "Hi", "--endpoint", bad_server.url, "--model", "no_usage", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["prompt_tokens"] is None and stats["cached_tokens"] is None and stats["gen_tokens"] == 2


def test_cli_max_tokens_holds_against_endless_tokens(bad_server: BadOpenAIServer,
                                                     capsys: pytest.CaptureFixture[str]):
    argv = ["chat", "Hi", "--endpoint", bad_server.url, "--model", "endless_tokens", "--max-tokens", "100", "--json"]
    assert main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == ("tok " * 100).rstrip() or out[0] == "tok " * 100
    assert json.loads(out[-1])["gen_tokens"] == 100
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_an_endless_model_list_is_refused_at_its_cap(bad_server: BadOpenAIServer):
    bad_server.endless_models = True
    transport = CountingTransport()
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, "ok"), transport=transport)
    try:
        engine.load()
        error = engine.next_event(timeout=HANG_UP_S)
    finally:
        engine.shutdown()
    assert isinstance(error, Error) and error.kind == "invalid_model" and "more than 8 MiB" in error.message
    assert transport.body_bytes <= MAX_JSON_BODY + READ
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_cancel_wakes_a_read_on_a_stalled_server(bad_server: BadOpenAIServer):
    engine = RemoteEngine(RemoteEndpoint(bad_server.url, "stalls"))
    try:
        request_id = engine.generate(HELLO, SamplingParams(max_tokens=8))
        assert isinstance(engine.next_event(timeout=HANG_UP_S), Token)  # then the client waits in a read
        engine.cancel(request_id)
        end = engine.next_event(timeout=HANG_UP_S)  # long before the server lets go (it never does here)
    finally:
        engine.shutdown()
    assert isinstance(end, Done) and end.finish_reason == "cancelled"
    assert not bad_server.release.is_set()

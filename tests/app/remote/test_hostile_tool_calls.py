"""A remote server's tool calls cannot exhaust this machine or hang a reply: too many calls, arguments
without end, wrong types and calls without a name each end the reply with one clear error line, and
the client hangs up at once (tests/fixtures/bad_openai_server.py, tests/fixtures/bad_tool_calls.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from app.remote.tool_call_tally import MAX_ARGUMENT_BYTES, MAX_TOOL_CALLS
from engine.protocol import ChatMessage, Done, Error, Event, ReplyShape, SamplingParams
from tests.app.remote.measure import CountingTransport, peak_memory
from tests.fixtures.bad_openai_server import BadOpenAIServer
from tests.fixtures.bad_tool_calls import TIME_ARGS, call_piece
from tests.fixtures.format_models import TIME_TOOL, WEATHER_TOOL
from tests.fixtures.range_server import serving

TOOLS = ReplyShape(reasoning="off", tools=json.dumps([WEATHER_TOOL, TIME_TOOL]), tool_choice="required")
HELLO = [ChatMessage("user", "What time is it in Tokyo?")]
READ = 64 << 10  # the most one socket read brings in (httpcore's read size)
HANG_UP_S = 30  # deadline for the server to see the client close (it is at once; the margin is for load)


@pytest.fixture
def bad_server() -> Iterator[BadOpenAIServer]:
    with serving(BadOpenAIServer()) as server:
        yield server


def ask(server: BadOpenAIServer, model: str, max_tokens: int = 4096) -> tuple[list[Event], int, int]:
    """The events of one reply with tools, the body bytes the client read, and its peak memory."""
    transport = CountingTransport()
    engine = RemoteEngine(RemoteEndpoint(server.url, model, read_timeout_s=HANG_UP_S), transport=transport)
    try:
        request_id = engine.generate(HELLO, SamplingParams(max_tokens=max_tokens), shape=TOOLS)
        events, peak = peak_memory(lambda: list(engine.stream(request_id)))
    finally:
        engine.shutdown()
    return events, transport.body_bytes, peak


def one_line_error(events: list[Event], server: BadOpenAIServer) -> str:
    end = events[-1]
    assert isinstance(end, Error) and end.kind == "remote", end
    assert "\n" not in end.message and server.url.removesuffix("/v1") in end.message
    return end.message


@pytest.mark.parametrize("per_event", [1, 10_000])  # a call an event, and all 10,000 in one
def test_ten_thousand_calls_are_refused_at_the_cap(bad_server: BadOpenAIServer, per_event: int):
    bad_server.calls_per_event = per_event
    events, read, peak = ask(bad_server, "many_calls")
    message = one_line_error(events, bad_server)
    assert f"more than {MAX_TOOL_CALLS} tool calls in one reply" in message
    event_bytes = len(json.dumps(call_piece(0, "call_0", "get_time", TIME_ARGS))) + 120
    assert read <= (MAX_TOOL_CALLS + 1) * event_bytes + READ if per_event == 1 else read < 2 << 20
    # (one event of 1.2 MB is parsed whole: its 10,000 objects take some 9 MB of Python's memory)
    assert peak < (4 << 20 if per_event == 1 else 16 << 20)
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_a_call_of_fifty_megabytes_is_refused_at_the_cap(bad_server: BadOpenAIServer):
    events, read, peak = ask(bad_server, "huge_arguments")
    message = one_line_error(events, bad_server)
    assert "tool call (get_weather) with more than 1 MiB of arguments" in message
    assert read <= MAX_ARGUMENT_BYTES + 4 * READ  # the cap, the event that passed it, a read in flight
    assert peak < 8 << 20
    assert bad_server.hung_up.wait(HANG_UP_S)


def test_a_server_that_ignores_max_tokens_in_its_calls_is_stopped_at_it(bad_server: BadOpenAIServer):
    # Each piece of a call counts as a token: at max_tokens the reply ends as length-limited, its unfinished
    # call not taken (as a local reply cut inside a call).
    events, read, _peak = ask(bad_server, "huge_arguments", max_tokens=4)
    end = events[-1]
    assert isinstance(end, Done) and end.finish_reason == "length" and end.tool_calls == ()
    assert read < 16 * READ
    assert bad_server.hung_up.wait(HANG_UP_S)


@pytest.mark.parametrize(("tool_calls", "words"), [
    ("get_weather", "tool_calls are not a list"),
    ([5], "tool call is not an object"),
    ([{"index": "0", "id": "c", "function": {"name": "get_time"}}], "index is not a count"),
    ([{"index": -1, "id": "c", "function": {"name": "get_time"}}], "index is not a count"),
    ([{"index": True, "id": "c", "function": {"name": "get_time"}}], "index is not a count"),
    ([{"index": 0, "id": 7, "function": {"name": "get_time"}}], "id is not text"),
    ([{"index": 0, "id": "c", "function": {"name": ["get_time"]}}], "name is not text"),
    ([{"index": 0, "id": "c", "function": {"name": "get_time", "arguments": {"zone": "UTC"}}}],
     "arguments is not text"),
    ([{"index": 0, "id": "c", "function": "get_time"}], "function is not an object"),
    ([{"index": 0, "id": "c", "type": "retrieval", "function": {"name": "get_time"}}], "of type 'retrieval'"),
    ([{"index": 0, "id": "c" * 1000, "function": {"name": "get_time"}}], "id is longer than 256 characters"),
    ([{"index": 0, "id": "c", "function": {"name": "f" * 1000}}], "name is longer than 256 characters"),
])
def test_wrong_types_in_tool_calls_are_a_malformed_stream(bad_server: BadOpenAIServer, tool_calls: object,
                                                          words: str):
    bad_server.bad_tool_calls = tool_calls
    events, _read, _peak = ask(bad_server, "bad_calls")
    message = one_line_error(events, bad_server)
    assert "sent a malformed stream" in message and words in message


def test_a_call_without_a_function_name_is_a_malformed_stream(bad_server: BadOpenAIServer):
    events, _read, _peak = ask(bad_server, "nameless")
    assert "a tool call came without a function name" in one_line_error(events, bad_server)

"""The tool loop of a ChatSession: a reply that calls tools pauses, asks, runs the calls on a real MCP server
(a child process), and goes on with their results in the same message; with a scripted engine.

The MCP servers' callbacks come on their own thread and reach the session as events through the
engine's outbox, the way the window posts them onto its GUI thread; `pump_until` hands them over
until what the test waits for has happened (with a deadline).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pytest

from app.chat.tool_rounds import DENIED, ToolHost
from app.mcp.servers import McpServers
from app.mcp.types import ServerConfig
from engine.protocol import ReplyShape, ToolCall
from tests.app.chat.conftest import Chat
from tests.paths import FIXTURES

ECHO = FIXTURES / "mcp_servers" / "echo_server.py"
DEADLINE_S = 60.0


@dataclass
class Tools:
    servers: McpServers
    for_good: set[tuple[str, str]]


def pump_until(chat: Chat, done: Callable[[], bool], what: str) -> None:
    """Hand the session every event (the MCP servers' come from their thread) until `done()`."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        chat.engine.pump()
        if done():
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _roomy(chat: Chat) -> None:
    """A context the echo server's eight tools fit in (they may take a quarter of it)."""
    settings = chat.session.current.settings
    chat.session.update_settings(replace(settings, load=replace(settings.load, n_ctx=16384)))


def _tools(chat: Chat, timeout_s: float = 30.0) -> Iterator[Tools]:
    chat.engine.tool_format = "hermes"
    for_good: set[tuple[str, str]] = set()
    config = ServerConfig("echo", command=sys.executable, args=(str(ECHO),), timeout_s=timeout_s)
    servers = McpServers([config], on_status=chat.engine.outbox.append)
    host = ToolHost(servers, chat.engine.outbox.append, lambda s, t: for_good.add((s, t)),
                    lambda s, t: (s, t) in for_good)
    chat.session.use_tools(host)
    _roomy(chat)
    chat.started()
    chat.session.set_tool_servers(("echo",))
    pump_until(chat, lambda: servers.statuses()[0].state == "ready", "the echo server")
    try:
        yield Tools(servers, for_good)
    finally:
        servers.close()


@pytest.fixture
def tools(chat: Chat) -> Iterator[Tools]:
    yield from _tools(chat)


def _asked(chat: Chat) -> list:
    return [a[0] for a in chat.heard.of("tool_permission_asked")]


def _send(chat: Chat, text: str = "Echo hi, please.") -> int:
    assert chat.session.send(text)
    pump_until(chat, lambda: bool(chat.engine.prompts), "the request")
    return chat.engine.last_request


def _call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def _next_request(chat: Chat, after: int) -> int:
    pump_until(chat, lambda: chat.engine.last_request > after, "the next request")
    return chat.engine.last_request


def test_a_reply_asks_runs_the_call_and_goes_on_with_its_result(chat: Chat, tools: Tools):
    first = _send(chat)
    shape: ReplyShape = chat.engine.shapes[first]
    assert [t["function"]["name"] for t in json.loads(shape.tools)] == [
        t.qualified for t in tools.servers.tools(["echo"])]
    chat.engine.stream(first, "Let me echo it.")
    chat.engine.call_tools(first, "Let me echo it.", _call("call_1", "echo", text="hi there"))
    chat.engine.pump()

    ask = _asked(chat)[-1]
    assert ask is not None and ask.call.name == "echo" and json.loads(ask.call.arguments) == {"text": "hi there"}
    step_message = chat.heard.last("tool_step")[0]
    assert step_message.tool_steps[0].text == "Let me echo it." and step_message.tool_steps[0].calls[0].status == "pending"
    chat.session.answer_permission("call_1", "once")
    second = _next_request(chat, first)

    prompt = chat.engine.prompts[second]
    assert prompt[-2].role == "assistant" and prompt[-2].content == "Let me echo it."
    assert [(c.id, c.name) for c in prompt[-2].tool_calls] == [("call_1", "echo")]
    assert prompt[-1].role == "tool" and prompt[-1].tool_call_id == "call_1" and prompt[-1].content == "hi there"
    assert chat.engine.shapes[second].tools == shape.tools  # the model may call again
    statuses = [a[2].status for a in chat.heard.of("tool_call_changed")]
    assert statuses == ["running", "ok"]
    assert _asked(chat)[-1] is None

    chat.engine.stream(second, "It says hi there.")
    chat.engine.finish(second, "It says hi there.")
    chat.engine.pump()
    message = chat.heard.last("stream_finished")[0]
    assert message.state == "complete" and message.content == "It says hi there."
    stored = chat.store.get_message(message.id)
    assert stored.tool_steps == message.tool_steps
    (call,) = stored.tool_steps[0].calls
    assert (call.status, call.result, call.server) == ("ok", "hi there", "echo") and call.seconds > 0
    assert message.stats["tool_steps"] == 1


def test_a_long_result_reaches_the_model_cut_and_stays_whole_in_the_message(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "big"))
    first = _send(chat)
    chat.engine.call_tools(first, "", _call("a", "big", size=100_000))
    second = _next_request(chat, first)
    sent = chat.engine.prompts[second][-1].content
    assert sent.startswith("x" * 65_536)
    assert sent.endswith("\n[cut: the result is 100,000 bytes; the model is given the first 65,536]")
    chat.engine.finish(second, "That was long.")
    chat.engine.pump()
    (call,) = chat.store.get_message(chat.heard.last("stream_finished")[0].id).tool_steps[0].calls
    assert call.result == "x" * 100_000


def test_always_in_this_chat_runs_that_tool_without_asking_again(chat: Chat, tools: Tools):
    first = _send(chat)
    chat.engine.call_tools(first, "", _call("a", "echo", text="one"))
    chat.engine.pump()
    chat.session.answer_permission("a", "chat")
    second = _next_request(chat, first)
    asked_before = len([a for a in _asked(chat) if a is not None])
    chat.engine.call_tools(second, "", _call("b", "echo", text="two"))
    third = _next_request(chat, second)
    assert len([a for a in _asked(chat) if a is not None]) == asked_before
    assert chat.engine.prompts[third][-1].content == "two"
    assert chat.store.get_conversation(chat.session.current.id).settings.allowed_tools == ("echo/echo",)
    assert tools.for_good == set()
    chat.engine.finish(third, "Done.")
    chat.engine.pump()
    fresh = chat.session.new_conversation()  # it takes the open chat's settings, but not what it allowed
    assert fresh.settings.tool_servers == ("echo",) and fresh.settings.allowed_tools == ()


def test_always_for_this_tool_is_kept_for_good(chat: Chat, tools: Tools):
    first = _send(chat)
    chat.engine.call_tools(first, "", _call("a", "echo", text="x"))
    chat.engine.pump()
    chat.session.answer_permission("a", "tool")
    _next_request(chat, first)
    assert tools.for_good == {("echo", "echo")}
    assert chat.session.current.settings.allowed_tools == ()


def test_a_denied_call_tells_the_model_and_the_reply_goes_on(chat: Chat, tools: Tools):
    first = _send(chat)
    chat.engine.call_tools(first, "", _call("a", "echo", text="secret"))
    chat.engine.pump()
    chat.session.answer_permission("a", "deny")
    second = _next_request(chat, first)
    assert chat.engine.prompts[second][-1].content == DENIED
    chat.engine.finish(second, "Fine.")
    chat.engine.pump()
    (call,) = chat.heard.last("stream_finished")[0].tool_steps[0].calls
    assert call.status == "denied"


def test_parallel_calls_run_at_once_and_come_back_in_the_model_s_order(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "sleep"))
    first = _send(chat)
    chat.engine.call_tools(first, "", _call("a", "sleep", seconds=1.5), _call("b", "sleep", seconds=1.5),
                           _call("c", "sleep", seconds=1.5))
    started = time.monotonic()
    second = _next_request(chat, first)
    assert time.monotonic() - started < 4.0  # three 1.5 s calls one after another would take 4.5 s
    assert [m.tool_call_id for m in chat.engine.prompts[second][-3:]] == ["a", "b", "c"]
    assert not _asked(chat) or _asked(chat)[-1] is None


def test_stop_while_a_call_runs_cancels_it_and_ends_the_reply(chat: Chat, tools: Tools, tmp_path):
    tools.for_good.add(("echo", "sleep"))
    marker = tmp_path / "cancelled"
    first = _send(chat)
    chat.engine.call_tools(first, "Waiting.", _call("a", "sleep", seconds=60, marker=str(marker)))
    pump_until(chat, lambda: marker.exists() and marker.read_text() == "started", "the call to reach the server")
    chat.session.stop()
    message = chat.heard.last("stream_finished")[0]
    assert message.state == "cancelled"
    assert message.tool_steps[0].calls[0].status == "cancelled"
    assert chat.engine.last_request == first  # nothing more was asked of the model
    pump_until(chat, lambda: marker.read_text() == "cancelled", "the server to hear the cancel")
    assert not chat.session.busy


def test_the_step_cap_stops_the_reply_and_says_so(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "echo"))
    chat.session.update_settings(replace(chat.session.current.settings, tool_step_cap=2))
    request = _send(chat)
    for i in range(2):
        chat.engine.call_tools(request, "", _call(f"c{i}", "echo", text=str(i)))
        request = _next_request(chat, request)
    chat.engine.call_tools(request, "Again.", _call("c2", "echo", text="2"))
    chat.engine.pump()
    message = chat.heard.last("stream_finished")[0]
    assert message.state == "complete" and message.stats["stopped_for"] == "tool_cap"
    assert [s.calls[0].status for s in message.tool_steps] == ["ok", "ok", "skipped"]
    assert chat.engine.last_request == request
    assert "cap of 2 tool steps" in chat.heard.last("notice")[0]


def test_a_chat_that_requires_a_call_asks_the_first_request_for_one_and_the_next_may_answer(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "echo"))
    chat.session.set_tool_choice("required")
    assert chat.store.get_conversation(chat.session.current.id).settings.tool_choice == "required"  # kept
    first = _send(chat)
    assert chat.engine.shapes[first].tool_choice == "required"
    chat.engine.call_tools(first, "", _call("c1", "echo", text="hi"))
    second = _next_request(chat, first)
    assert chat.engine.shapes[second].tool_choice == "auto"  # it answers with the result: not another call
    chat.engine.finish(second, "It says hi.")
    chat.engine.pump()
    chat.session.set_tool_servers(())
    third = _send(chat, "And without tools?")
    assert chat.engine.shapes[third].tools is None and chat.engine.shapes[third].tool_choice == "auto"


def test_calls_that_cannot_run_fail_by_name_and_the_reply_goes_on(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "echo"))
    tools.for_good.add(("echo", "add"))
    first = _send(chat)
    chat.engine.call_tools(first, "", ToolCall("a", "nope", "{}"), ToolCall("b", "echo", "{not json"),
                           _call("c", "add", a="one", b=2), _call("d", "fail", message="boom"))
    chat.engine.pump()
    assert _asked(chat)[-1].call.id == "d"  # `fail` is not allowed: it asks while the others end
    chat.session.answer_permission("d", "once")
    second = _next_request(chat, first)
    results = {m.tool_call_id: m.content for m in chat.engine.prompts[second] if m.role == "tool"}
    assert results["a"] == "There is no tool named 'nope'."
    assert results["b"].startswith("The arguments are not JSON")
    assert results["c"] == "Error: add: argument 'a' does not fit its schema: 'one' is not of type 'number'"
    assert results["d"].startswith("Error:") and results["d"].endswith("boom")  # the tool's own error


def test_a_call_past_its_timeout_fails_by_name(chat: Chat):
    gen = _tools(chat, timeout_s=1.0)
    tools = next(gen)
    try:
        tools.for_good.add(("echo", "sleep"))
        first = _send(chat)
        chat.engine.call_tools(first, "", _call("a", "sleep", seconds=30))
        second = _next_request(chat, first)
        result = chat.engine.prompts[second][-1].content
        assert result.startswith("Error:") and "sleep" in result and "1 s" in result
    finally:
        gen.close()


def test_a_server_that_dies_mid_call_fails_the_call_and_the_reply_goes_on(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "die"))
    first = _send(chat)
    chat.engine.call_tools(first, "", _call("a", "die"))
    second = _next_request(chat, first)
    assert chat.engine.prompts[second][-1].content.startswith("Error:")
    chat.engine.finish(second, "The tool died.")
    chat.engine.pump()
    assert chat.heard.last("stream_finished")[0].state == "complete"


def test_an_engine_that_dies_during_a_call_keeps_the_reply_as_interrupted(chat: Chat, tools: Tools):
    tools.for_good.add(("echo", "sleep"))
    first = _send(chat)
    chat.engine.call_tools(first, "Checking.", _call("a", "sleep", seconds=0.5))
    chat.engine.pump()
    chat.engine.running = False  # the process is gone; its death is heard when the reply goes on
    pump_until(chat, lambda: bool(chat.heard.of("stream_finished")), "the reply to end")
    message = chat.heard.last("stream_finished")[0]
    assert message.state == "interrupted"
    assert message.tool_steps[0].calls[0].status == "ok"


def test_a_model_without_tools_in_its_template_answers_without_them(chat: Chat, tools: Tools):
    chat.engine.tool_format = None
    chat.session.reload_engine()
    chat.engine.pump()
    request = _send(chat)
    assert chat.engine.shapes[request].tools is None
    assert "takes no tools" in chat.heard.last("notice")[0]


def test_a_reply_waits_for_its_servers_to_start(chat: Chat):
    chat.engine.tool_format = "hermes"
    config = ServerConfig("echo", command=sys.executable, args=(str(ECHO),))
    servers = McpServers([config], on_status=chat.engine.outbox.append)
    try:
        chat.session.use_tools(ToolHost(servers, chat.engine.outbox.append, lambda s, t: None, lambda s, t: False))
        _roomy(chat)
        chat.started()
        chat.session.update_settings(replace(chat.session.current.settings, tool_servers=("echo",)))
        assert chat.session.send("Hello")
        assert not chat.engine.prompts and chat.session.busy
        assert "Starting tools: echo" in chat.heard.last("notice")[0]
        pump_until(chat, lambda: bool(chat.engine.prompts), "the reply to begin")
        assert json.loads(chat.engine.shapes[chat.engine.last_request].tools)
    finally:
        servers.close()


def test_a_server_with_a_thousand_tools_gives_the_model_what_fits_and_says_so(chat: Chat):
    chat.engine.tool_format = "hermes"
    bad = FIXTURES / "mcp_servers" / "bad_server.py"
    config = ServerConfig("many", command=sys.executable, args=(str(bad), "many_tools", "--count", "1000"))
    servers = McpServers([config], on_status=chat.engine.outbox.append)
    try:
        chat.session.use_tools(ToolHost(servers, chat.engine.outbox.append, lambda s, t: None, lambda s, t: False))
        settings = chat.session.current.settings
        chat.session.update_settings(replace(settings, load=replace(settings.load, n_ctx=8192)))
        chat.started()
        chat.session.set_tool_servers(("many",))
        pump_until(chat, lambda: servers.statuses()[0].state == "ready", "the server of 1,001 tools")
        request = _send(chat, "Hello")
        offered = [t["function"]["name"] for t in json.loads(chat.engine.shapes[request].tools)]
        assert 10 < len(offered) < 1001
        assert offered == ["ok", *(f"tool_{i:04d}" for i in range(len(offered) - 1))]  # in the server's order
        notices = [n[0] for n in chat.heard.of("notice")]
        assert (f"Tools: {len(offered):,} of 1,001 fit the context; {1001 - len(offered):,} left out "
                "(a larger context lets more in)") in notices
    finally:
        servers.close()

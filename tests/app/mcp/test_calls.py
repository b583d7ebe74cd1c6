"""McpServers with real MCP servers (tests/fixtures/mcp_servers) as child processes: calls, their outcomes,
cancelling, timeouts, stopping."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from app.mcp.result_cut import KEPT_RESULT_BYTES
from app.mcp.types import McpTool
from tests.app.mcp.helpers import Outcomes, call, gone, started, stdio, tool, wait_for_pid, wait_for_text
from tests.fixtures.mcp_servers import BAD, ECHO

ECHO_TOOL = McpTool("echo", "echo", "echo", "", {"type": "object"})  # as a caller may hold it from before


@pytest.fixture
def echo(tmp_path: Path):
    pid_file = tmp_path / "echo.pid"
    servers, statuses = started([stdio("echo", ECHO, "--pid-file", str(pid_file), timeout_s=5, env={"SECRET": "s1"})])
    status = statuses.wait("echo", "ready", "failed")
    assert status.state == "ready", status
    yield servers, statuses, wait_for_pid(pid_file)
    servers.close()


def test_a_ready_server_lists_its_tools_and_answers(echo):
    servers, _, _ = echo
    (status,) = servers.statuses()
    assert [t.name for t in status.tools] == ["echo", "add", "sleep", "fail", "big", "picture", "env", "die"]
    assert status.left_out == ()
    assert call(servers, tool(servers, "echo", "echo"), {"text": "héllo"}).text == "héllo"
    outcome = call(servers, tool(servers, "echo", "add"), {"a": 2, "b": 3})
    assert outcome.ok and outcome.text == "5.0" and outcome.seconds > 0
    assert call(servers, tool(servers, "echo", "env"), {"name": "SECRET"}).text == "s1"  # the config's env


def test_arguments_that_do_not_fit_the_schema_never_reach_the_server(echo):
    servers, _, _ = echo
    outcome = call(servers, tool(servers, "echo", "add"), {"a": 2, "b": "three"})
    assert not outcome.ok and outcome.text.startswith("add: argument 'b' does not fit its schema:")
    outcome = call(servers, tool(servers, "echo", "echo"), {})
    assert outcome.text == "echo: the arguments do not fit its schema: 'text' is a required property"


def test_tool_errors_images_and_big_results(echo):
    servers, _, _ = echo
    failed = call(servers, tool(servers, "echo", "fail"), {"message": "disk full"})
    assert not failed.ok and not failed.cancelled and failed.text.endswith("disk full")
    assert call(servers, tool(servers, "echo", "picture"), {}).text == "a pixel\n[image: 1x1 PNG]"
    big = call(servers, tool(servers, "echo", "big"), {"size": KEPT_RESULT_BYTES + 10})
    assert big.ok and big.text.endswith(f"\n[cut: the result was {KEPT_RESULT_BYTES + 10:,} bytes; only the first"
                                        f" {KEPT_RESULT_BYTES:,} are kept]")


def test_cancelling_a_call_tells_the_server_and_says_cancelled_once(echo, tmp_path: Path):
    servers, _, _ = echo
    marker = tmp_path / "marker"
    outcomes = Outcomes()
    cancel = servers.call(tool(servers, "echo", "sleep"), {"seconds": 60, "marker": str(marker)}, outcomes)
    wait_for_text(marker, "started")  # the call reached the server (an earlier cancel: the next test)
    cancel()
    cancel()
    outcome = outcomes.wait()
    assert outcome.cancelled and not outcome.ok and outcome.seconds < 10
    wait_for_text(marker, "cancelled")  # the server was told
    time.sleep(0.2)
    assert len(outcomes.outcomes) == 1
    assert call(servers, tool(servers, "echo", "echo"), {"text": "still here"}).text == "still here"


def test_a_cancel_before_the_call_starts_still_ends_it_once(echo):
    servers, _, _ = echo
    outcomes = Outcomes()
    servers.call(tool(servers, "echo", "sleep"), {"seconds": 60}, outcomes)()
    assert outcomes.wait().cancelled


def test_a_call_past_the_servers_timeout_fails_by_name(tmp_path: Path):
    servers, statuses = started([stdio("slow", BAD, "hang_call", timeout_s=1)])
    try:
        assert statuses.wait("slow", "ready", "failed").state == "ready"
        started_at = time.monotonic()
        outcome = call(servers, tool(servers, "slow", "hang"), {})
        assert outcome.text == "hang did not answer within 1 s" and not outcome.ok
        assert time.monotonic() - started_at < 5
    finally:
        servers.close()


def test_a_server_that_exits_mid_call_fails_the_call_and_the_server(echo):
    servers, statuses, pid = echo
    outcome = call(servers, tool(servers, "echo", "die"), {})
    assert outcome.text == "die: the server exited" and not outcome.ok
    failed = statuses.wait("echo", "failed")
    assert failed.reason == "the server exited" and "echo_server.py: started" in failed.stderr_tail
    assert servers.tools(["echo"]) == []
    assert call(servers, ECHO_TOOL, {"text": "x"}).text == "echo: the server echo is not running"
    deadline = time.monotonic() + 10
    while not gone(pid):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_stop_and_close_leave_no_process_and_end_calls(echo):
    servers, statuses, pid = echo
    outcomes = Outcomes()
    servers.call(tool(servers, "echo", "sleep"), {"seconds": 60}, outcomes)
    time.sleep(0.2)
    servers.stop(["echo"])
    assert gone(pid)
    assert statuses.wait("echo", "stopped").tools == ()
    assert outcomes.wait().text in ("sleep: the server was stopped", "sleep: cancelled")
    servers.start(["echo"])  # and it starts again
    assert statuses.wait("echo", "ready", "failed").state == "ready"
    servers.close()
    servers.close()
    late = Outcomes()
    servers.call(ECHO_TOOL, {}, late)
    assert late.wait().text == "echo: the MCP servers are closed"


def test_a_server_deaf_to_stdin_and_sigterm_is_killed_within_bounds(tmp_path: Path):
    pid_file = tmp_path / "deaf.pid"
    servers, statuses = started([stdio("deaf", BAD, "deaf", "--pid-file", str(pid_file))])
    assert statuses.wait("deaf", "ready", "failed").state == "ready"
    pid = wait_for_pid(pid_file)
    started_at = time.monotonic()
    servers.close()
    took = time.monotonic() - started_at
    assert gone(pid) and took < 10, took


def test_a_new_configuration_stops_what_changed_or_went_and_adds_what_came(echo, tmp_path: Path):
    servers, statuses, pid = echo
    before = stdio("echo", ECHO, "--pid-file", str(tmp_path / "echo.pid"), timeout_s=5, env={"SECRET": "s1"})
    second = stdio("second", ECHO, timeout_s=5)
    servers.configure([before, second])  # echo unchanged: it keeps running
    assert [(s.name, s.state) for s in servers.statuses()] == [("echo", "ready"), ("second", "stopped")]
    assert not gone(pid)
    servers.configure([second, dataclasses.replace(before, timeout_s=9)])  # echo changed: stopped
    assert gone(pid)
    assert [(s.name, s.state) for s in servers.statuses()] == [("second", "stopped"), ("echo", "stopped")]
    servers.start(["echo"])
    assert statuses.wait("echo", "ready", "failed").state == "ready"
    servers.configure([second])
    assert [s.name for s in servers.statuses()] == ["second"] and servers.tools(["echo"]) == []

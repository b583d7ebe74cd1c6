"""Servers that misbehave (tests/fixtures/mcp_servers/bad_server.py): each ends in one clear status, never a
hang, a traceback or a process left behind."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from app.mcp.types import ServerConfig
from tests.app.mcp.helpers import call, gone, started, stdio, tool, wait_for_pid
from tests.fixtures.mcp_servers import BAD, ECHO


def test_a_command_that_does_not_exist(tmp_path: Path):
    missing = tmp_path / "no-such-program"
    servers, statuses = started([ServerConfig("missing", command=str(missing))])
    try:
        status = statuses.wait("missing", "failed", "ready")
        assert status.reason == f"cannot run {missing}: No such file or directory"
    finally:
        servers.close()


def test_a_server_that_exits_at_once_shows_its_stderr(tmp_path: Path):
    pid_file = tmp_path / "exit.pid"
    servers, statuses = started([stdio("quits", BAD, "exit", "--pid-file", str(pid_file))])
    try:
        status = statuses.wait("quits", "failed", "ready")
        assert status.state == "failed" and status.reason == "the server exited before it was ready"
        assert status.stderr_tail.endswith("bad_server: cannot start: MISSING_API_KEY is not set")
        assert gone(wait_for_pid(pid_file))
    finally:
        servers.close()


def test_a_server_that_never_answers_the_handshake_times_out(tmp_path: Path):
    pid_file = tmp_path / "hang.pid"
    servers, statuses = started([stdio("mute", BAD, "hang_init", "--pid-file", str(pid_file))], startup_timeout_s=2)
    try:
        started_at = time.monotonic()
        status = statuses.wait("mute", "failed", "ready")
        assert status.reason == "it did not start within 2 s (no answer to the MCP handshake)"
        assert time.monotonic() - started_at < 10
        assert "mode hang_init" in status.stderr_tail
        assert gone(wait_for_pid(pid_file))
    finally:
        servers.close()


def test_a_server_flooding_stdout_is_given_up_and_memory_stays_bounded(tmp_path: Path):
    pid_file = tmp_path / "flood.pid"
    before = psutil.Process().memory_info().rss
    servers, statuses = started([stdio("flood", BAD, "flood", "--pid-file", str(pid_file))], startup_timeout_s=20)
    try:
        status = statuses.wait("flood", "failed", "ready")
        assert status.reason == "it wrote 100 lines that are not MCP messages on its stdout"
        assert gone(wait_for_pid(pid_file))
        assert psutil.Process().memory_info().rss - before < 100 * 2**20
    finally:
        servers.close()


def test_one_banner_line_on_stdout_is_survived():
    servers, statuses = started([stdio("chatty", BAD, "banner")])
    try:
        assert statuses.wait("chatty", "ready", "failed").state == "ready"
        assert call(servers, tool(servers, "chatty", "ok"), {}).text == "ok"
    finally:
        servers.close()


def test_tools_whose_schema_is_not_json_schema_are_left_out_by_name():
    servers, statuses = started([stdio("schemas", BAD, "bad_schema")])
    try:
        status = statuses.wait("schemas", "ready", "failed")
        assert [t.name for t in status.tools] == ["ok"]
        assert status.left_out == (
            "not_a_schema: its input schema is not JSON Schema (at properties/x/type: 'nonsense' is not valid"
            " under any of the given schemas)",
            "negative: its input schema is not JSON Schema (at properties/x/minLength: -1 is less than the"
            " minimum of 0)",
        )
    finally:
        servers.close()


def test_a_thousand_tools_are_listed_quickly():
    servers, statuses = started([stdio("many", BAD, "many_tools", "--count", "1000")])
    try:
        started_at = time.monotonic()
        status = statuses.wait("many", "ready", "failed")
        took = time.monotonic() - started_at
        assert len(status.tools) == 1001 and took < 15, took
        print(f"1,001 tools ready in {took:.2f} s (the server's start included)")
        assert call(servers, tool(servers, "many", "tool_0999"), {"x": "a"}).text == "called tool_0999"
    finally:
        servers.close()


def test_two_servers_with_the_same_tool_names_are_namespaced():
    servers, statuses = started([stdio("one", ECHO), stdio("two", ECHO), stdio("three", BAD, "banner")])
    try:
        for name in ("one", "two", "three"):
            assert statuses.wait(name, "ready", "failed").state == "ready"
        names = [t.qualified for t in servers.tools(["one", "two", "three"])]
        assert names[:2] == ["one__echo", "one__add"] and "two__echo" in names and "ok" in names
        assert [t.qualified for t in servers.tools(["two", "three"])][:2] == ["echo", "add"]
        both = servers.tools(["one", "two"])
        assert call(servers, next(t for t in both if t.qualified == "two__echo"), {"text": "2"}).text == "2"
    finally:
        servers.close()

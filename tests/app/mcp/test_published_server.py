"""A published MCP server no one here wrote: `mcp-server-time`, the reference time server, installed from the
package index (a dev dependency), started as users start it, over stdio."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from app.mcp.types import ServerConfig
from tests.app.mcp.helpers import call, started, tool


@pytest.fixture
def time_server():
    config = ServerConfig("time", command=sys.executable,
                          args=("-m", "mcp_server_time", "--local-timezone", "Europe/Paris"), timeout_s=20)
    servers, statuses = started([config])
    status = statuses.wait("time", "ready", "failed")
    assert status.state == "ready", status
    yield servers
    servers.close()


def test_its_tools_are_listed_with_their_schemas_and_answer(time_server):
    (status,) = time_server.statuses()
    assert {t.name for t in status.tools} == {"get_current_time", "convert_time"}
    current = tool(time_server, "time", "get_current_time")
    assert current.description and current.input_schema["required"] == ["timezone"]

    before = datetime.now(ZoneInfo("Asia/Tokyo")).replace(microsecond=0)
    outcome = call(time_server, current, {"timezone": "Asia/Tokyo"})
    assert outcome.ok, outcome
    answer = json.loads(outcome.text)
    assert answer["timezone"] == "Asia/Tokyo"
    said = datetime.fromisoformat(answer["datetime"])
    assert said.utcoffset().total_seconds() == 9 * 3600
    assert abs((said - before).total_seconds()) < 60

    converted = call(time_server, tool(time_server, "time", "convert_time"),
                     {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kolkata"})
    assert converted.ok, converted
    assert json.loads(converted.text)["target"]["datetime"].endswith("T17:30:00+05:30")  # India keeps no DST


def test_its_own_errors_fail_the_call_by_name_and_it_keeps_serving(time_server):
    current = tool(time_server, "time", "get_current_time")
    outcome = call(time_server, current, {"timezone": "Mars/Olympus_Mons"})
    assert not outcome.ok and "Mars/Olympus_Mons" in outcome.text
    missing = call(time_server, current, {})
    assert not missing.ok and missing.text == "get_current_time: the arguments do not fit its schema: " \
                                               "'timezone' is a required property"
    assert call(time_server, current, {"timezone": "UTC"}).ok

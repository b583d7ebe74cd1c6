"""A streamable HTTP server on 127.0.0.1 (echo_server.py --http, a child process) whose token must arrive."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.mcp.types import ServerConfig
from tests.app.mcp.helpers import Outcomes, call, started, tool
from tests.fixtures.mcp_servers import ECHO


@pytest.fixture
def http_url():
    process = subprocess.Popen([sys.executable, str(ECHO), "--http", "--token", "t0ken"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("port "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_the_configured_header_reaches_the_server_and_tools_work(http_url: str):
    servers, statuses = started([ServerConfig("web", url=http_url, headers={"Authorization": "Bearer t0ken"})])
    try:
        status = statuses.wait("web", "ready", "failed")
        assert status.state == "ready", status.reason
        assert call(servers, tool(servers, "web", "echo"), {"text": "over http"}).text == "over http"
        outcomes = Outcomes()
        servers.call(tool(servers, "web", "sleep"), {"seconds": 60}, outcomes)()
        assert outcomes.wait().cancelled
    finally:
        servers.close()
    assert statuses.wait("web", "stopped")


def test_a_wrong_token_fails_with_the_http_status_and_no_secret(http_url: str):
    servers, statuses = started([ServerConfig("web", url=http_url, headers={"Authorization": "Bearer wrong-s3cret"}),
                                 ServerConfig("nobody", url="http://127.0.0.1:9/mcp")])
    try:
        assert statuses.wait("web", "failed", "ready").reason == "the server answered HTTP 401 Unauthorized"
        refused = statuses.wait("nobody", "failed", "ready").reason
        assert refused.startswith("cannot reach http://127.0.0.1:9: ")
        assert all("s3cret" not in (s.reason or "") for s in servers.statuses())
    finally:
        servers.close()

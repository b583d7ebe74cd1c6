"""What the MCP tests share: servers built on the fixture servers, statuses and outcomes waited for with
a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from app.mcp.servers import McpServers
from app.mcp.types import McpTool, ServerConfig, ServerStatus, ToolOutcome
from tests.fixtures.mcp_servers import server_command


def stdio(name: str, script: Path, *args: str, **fields) -> ServerConfig:
    command, argv = server_command(script, *args)
    return ServerConfig(name, command=command, args=argv, **fields)


class Statuses:
    """Records every status McpServers reports, and waits for one."""

    def __init__(self):
        self.seen: list[ServerStatus] = []
        self._cond = threading.Condition()

    def __call__(self, status: ServerStatus) -> None:
        with self._cond:
            self.seen.append(status)
            self._cond.notify_all()

    def wait(self, name: str, *states: str, timeout: float = 30) -> ServerStatus:
        """The first status of `name` in one of `states` (from those reported since the last wait on it)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((s for s in self.seen if s.name == name and s.state in states), None)
                if found is not None:
                    self.seen = [s for s in self.seen if s is not found]
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"{name} never reached {states}; seen {[(s.name, s.state) for s in self.seen]}"
                self._cond.wait(left)


class Outcomes:
    """An on_done that records every outcome, and waits for them."""

    def __init__(self):
        self.outcomes: list[ToolOutcome] = []
        self._cond = threading.Condition()

    def __call__(self, outcome: ToolOutcome) -> None:
        with self._cond:
            self.outcomes.append(outcome)
            self._cond.notify_all()

    def wait(self, count: int = 1, timeout: float = 30) -> ToolOutcome:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.outcomes) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {len(self.outcomes)} outcome(s) of {count}"
                self._cond.wait(left)
            return self.outcomes[count - 1]


def call(servers: McpServers, tool: McpTool, arguments: dict, timeout: float = 30) -> ToolOutcome:
    outcomes = Outcomes()
    servers.call(tool, arguments, outcomes)
    return outcomes.wait(timeout=timeout)


def tool(servers: McpServers, server: str, name: str) -> McpTool:
    return next(t for t in servers.tools([server]) if t.name == name)


def wait_for_pid(pid_file: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, f"no pid in {pid_file}"
        time.sleep(0.02)
    return int(pid_file.read_text())


def wait_for_text(path: Path, text: str, timeout: float = 30) -> None:
    """Wait until the file holds `text` (a test server writes it)."""
    deadline = time.monotonic() + timeout
    while not path.exists() or path.read_text() != text:
        assert time.monotonic() < deadline, f"{path} never said {text!r}"
        time.sleep(0.02)


def gone(pid: int) -> bool:
    """The process has exited and been reaped (no zombie left)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_DEAD
    except psutil.NoSuchProcess:
        return True


def started(configs: list[ServerConfig], names: list[str] | None = None, **options) -> tuple[McpServers, Statuses]:
    statuses = Statuses()
    servers = McpServers(configs, statuses, **options)
    servers.start(names if names is not None else [c.name for c in configs])
    return servers, statuses


Cleanup = Callable[[], None]

"""A configuration store and a set of servers that keep everything in memory: the two protocols the servers
dialog and the Tools button work against (app/gui/tools/protocols.py), without processes (app/mcp's own tests
run real servers)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from app.mcp.types import McpTool, ServerConfig, ServerStatus


class MemoryStore:
    def __init__(self, configs: list[ServerConfig] | None = None):
        self.configs = list(configs or [])

    def load(self) -> list[ServerConfig]:
        return list(self.configs)

    def add(self, config: ServerConfig) -> None:
        if any(c.name == config.name for c in self.configs):
            raise ValueError(f"A server named {config.name} is already configured.")
        self.configs.append(config)

    def remove(self, name: str) -> None:
        self.configs = [c for c in self.configs if c.name != name]

    def set_enabled(self, name: str, enabled: bool) -> None:
        self.configs = [replace(c, enabled=enabled) if c.name == name else c for c in self.configs]

    def import_from(self, path: Path) -> tuple[list[str], list[str]]:
        entries = json.loads(path.read_text())["mcpServers"]  # ValueError when it is not JSON
        added, skipped = [], []
        for name, entry in entries.items():
            try:
                self.add(ServerConfig(name, command=entry.get("command"), args=tuple(entry.get("args", ())),
                                      url=entry.get("url")))
                added.append(name)
            except ValueError:
                skipped.append(name)
        return added, skipped


class Servers:
    """Statuses set by the test; start and stop are recorded."""

    def __init__(self, statuses: list[ServerStatus] | None = None):
        self.states = {s.name: s for s in statuses or []}
        self.calls: list[tuple[str, tuple[str, ...] | None]] = []

    def statuses(self) -> list[ServerStatus]:
        return list(self.states.values())

    def start(self, names: Iterable[str]) -> None:
        self.calls.append(("start", tuple(names)))

    def stop(self, names: Iterable[str] | None = None) -> None:
        self.calls.append(("stop", None if names is None else tuple(names)))


def tool(server: str, name: str, description: str = "") -> McpTool:
    return McpTool(server, name, name, description, {"type": "object"})

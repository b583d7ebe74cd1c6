"""Where Tailor keeps its files (platformdirs), overridable for tests via TAILOR_HOME."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Tailor"


@dataclass(slots=True, frozen=True)
class AppPaths:
    data_dir: Path
    log_dir: Path
    cache_dir: Path
    config_dir: Path | None = None  # files the user may edit by hand; None: the data folder

    @property
    def mcp_config(self) -> Path:
        """The MCP servers (`mcpServers`, as Claude Desktop, LM Studio and Jan write it); app.mcp.config."""
        return (self.config_dir or self.data_dir) / "mcp.json"

    @property
    def mcp_secrets(self) -> Path:
        """The MCP servers' env values and headers where there is no usable system keyring (0600)."""
        return (self.config_dir or self.data_dir) / "mcp-secrets.json"

    @property
    def chat_db(self) -> Path:
        return self.data_dir / "chats.sqlite3"

    @property
    def engine_log(self) -> Path:
        """The engine processes' logs: each writes its own `engine-<start>-<pid>.log` (engine.process_log)."""
        return self.log_dir / "engine.log"

    @property
    def prefix_cache(self) -> Path:
        """Saved KV states of chat prefixes, so they stay warm across restarts (safe to delete)."""
        return self.cache_dir / "prefix-cache"

    @property
    def engine_status(self) -> Path:
        """One status file per running engine process (its latest memory report), for `tailor mem`."""
        return self.cache_dir / "engines"

    @property
    def app_log(self) -> Path:
        """The front ends' logs: each process writes its own `tailor-<start>-<pid>.log`."""
        return self.log_dir / "tailor.log"

    @classmethod
    def default(cls) -> AppPaths:
        """The user's standard folders, or everything under $TAILOR_HOME when it is set."""
        home = os.environ.get("TAILOR_HOME")
        if home:
            root = Path(home)
            return cls(data_dir=root / "data", log_dir=root / "logs", cache_dir=root / "cache",
                       config_dir=root / "config")
        return cls(
            data_dir=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
            log_dir=Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
            cache_dir=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
            config_dir=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        )

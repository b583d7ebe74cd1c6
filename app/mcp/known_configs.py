"""Where other apps keep their MCP servers, for `tailor mcp import claude|lmstudio|jan`.

Claude Desktop: claude_desktop_config.json in its config folder (Anthropic's MCP quickstart).
LM Studio: ~/.lmstudio/mcp.json on every system (lmstudio.ai/docs/app/mcp).
Jan: mcp_config.json in Jan's data folder, `<data dir>/Jan/data` (janhq/jan, src-tauri/src/core/app/paths.rs
and core/mcp/commands.rs); older releases used ~/.config/Jan/data on Linux (jan.ai/docs/data-folder).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APPS = ("claude", "lmstudio", "jan")


def candidates(app: str, home: Path | None = None, env: Mapping[str, str] | None = None,
               platform: str | None = None) -> list[Path]:
    """The files `app` may keep its servers in, most likely first."""
    home = home or Path.home()
    env = os.environ if env is None else env
    platform = platform or sys.platform
    if app == "lmstudio":
        return [home / ".lmstudio" / "mcp.json"]
    if platform == "darwin":
        support = home / "Library" / "Application Support"
        config_dirs, data_dirs = [support], [support]
    elif platform == "win32":
        roaming = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
        config_dirs, data_dirs = [roaming], [roaming]
    else:
        config_dirs = [Path(env.get("XDG_CONFIG_HOME") or home / ".config")]
        data_dirs = [Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")]
    if app == "claude":
        return [d / "Claude" / "claude_desktop_config.json" for d in config_dirs]
    if app == "jan":
        found = [d / "Jan" / "data" / "mcp_config.json" for d in data_dirs]
        return found + [d / "Jan" / "data" / "mcp_config.json" for d in config_dirs if d not in data_dirs]
    raise ValueError(f"unknown app {app!r}; known: {', '.join(APPS)}")


def locate(app: str, **where) -> Path:
    """The file of `app` that exists, else its most likely place (the error will name it)."""
    paths = candidates(app, **where)
    return next((p for p in paths if p.exists()), paths[0])

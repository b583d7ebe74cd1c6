"""Where other apps keep their MCP servers (the `mcpServers` shape Tailor imports): Claude Desktop, LM Studio and
Jan, on this system. No Qt."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(slots=True, frozen=True)
class ImportSource:
    """An app's MCP configuration file, and whether it is there."""

    app: str
    path: Path

    @property
    def found(self) -> bool:
        return self.path.is_file()


def import_sources(home: Path | None = None, platform: str = sys.platform,
                   environ: dict[str, str] | None = None) -> list[ImportSource]:
    """The files of Claude Desktop, LM Studio and Jan where they keep them on `platform`."""
    home = home or Path.home()
    env = os.environ if environ is None else environ
    if platform == "darwin":
        support = home / "Library" / "Application Support"
        claude, jan = support / "Claude", support / "Jan" / "data"
    elif platform.startswith("win"):
        appdata = Path(env.get("APPDATA", home / "AppData" / "Roaming"))
        claude, jan = appdata / "Claude", appdata / "Jan" / "data"
    else:
        config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        data = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
        claude, jan = config / "Claude", data / "Jan" / "data"
    return [ImportSource("Claude Desktop", claude / "claude_desktop_config.json"),
            ImportSource("LM Studio", home / ".lmstudio" / "mcp.json"),
            ImportSource("Jan", jan / "mcp_config.json")]

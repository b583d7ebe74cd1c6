"""What the window's MCP parts need of app/mcp: the configuration store and the running servers, as two small
protocols (the real `McpServers` and config store fit them as they are), and the relay that brings the servers'
status callbacks, which come on a background thread, onto the GUI thread.

    relay = StatusRelay(window)
    servers = McpServers(store, on_status=relay.post)      # called on the servers' own thread
    relay.status.connect(dialog.on_status)                 # runs on the GUI thread (queued)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Signal

from app.mcp.types import ServerConfig, ServerStatus


class ServerConfigStore(Protocol):
    """The MCP configuration file. A bad entry raises ValueError with one line saying why; a file that cannot be
    read or written, OSError."""

    def load(self) -> list[ServerConfig]:
        """Every configured server, in the file's order."""

    def add(self, config: ServerConfig) -> None:
        """Add a server (ValueError: its name is taken, or the entry is not valid)."""

    def remove(self, name: str) -> None:
        """Remove a server (and its secrets)."""

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Offer a server's tools to chats, or not."""

    def import_from(self, path: Path) -> tuple[list[str], list[str]]:
        """Add the servers of another app's `mcpServers` file: (the names added, the names skipped)."""


class ServerControl(Protocol):
    """The part of `ToolServers` (app/mcp/types.py) the window drives."""

    def statuses(self) -> list[ServerStatus]:
        """Every configured server's status, in the configuration's order."""

    def start(self, names: Iterable[str]) -> None:
        """Start these servers; their statuses follow through the status callback."""

    def stop(self, names: Iterable[str] | None = None) -> None:
        """Stop these servers (None: all)."""


class StatusRelay(QObject):
    """A status callback for any thread whose statuses arrive on the GUI thread as `status`.

    Signals:
        status(object): a ServerStatus, emitted on the thread this relay lives in (made on the GUI thread).
    """

    status = Signal(object)
    _posted = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        # Queued even from the GUI thread itself: `status` is always emitted on this object's thread, later.
        self._posted.connect(self.status.emit, Qt.ConnectionType.QueuedConnection)

    def post(self, status: ServerStatus) -> None:
        """Safe from any thread."""
        try:
            self._posted.emit(status)
        except RuntimeError:  # the relay was deleted while a server thread still reported
            pass

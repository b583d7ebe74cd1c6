"""McpTools: the window's MCP servers: the configuration file, the running servers and their statuses on the GUI
thread, the tool host the chat session runs calls through, and the servers dialog.

The MCP SDK takes half a second to import, so the servers (app.mcp.servers) are made only once a server is
configured: a window with none starts as fast as before. Until then `statuses` reads the configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from app.chat.tool_rounds import ToolHost
from app.gui.tools.protocols import StatusRelay
from app.gui.tools.servers_dialog import ServersDialog
from app.mcp.config import ConfigError, McpConfig
from app.mcp.types import ServerConfig, ServerStatus, ToolServers


class _ConfigStore:
    """McpConfig as the servers dialog takes it (ServerConfigStore); each change reaches the running servers."""

    def __init__(self, config: McpConfig, changed: Callable[[], None]):
        self._config, self._changed = config, changed

    def load(self) -> list[ServerConfig]:
        return self._config.load().servers

    def add(self, config: ServerConfig) -> None:
        self._config.add(config)
        self._changed()

    def remove(self, name: str) -> None:
        self._config.remove(name)
        self._changed()

    def set_enabled(self, name: str, enabled: bool) -> None:
        self._config.set_enabled(name, enabled)
        self._changed()

    def import_from(self, path: Path) -> tuple[list[str], list[str]]:
        report = self._config.import_from(path)
        self._changed()
        if report.errors and not report.added:
            raise ConfigError(report.errors[0])
        return report.added, report.skipped


class McpTools(QObject):
    """The MCP servers of the window.

    Args:
        config: the configuration file.
        deliver: brings an event onto the session's thread, from any thread (ChatController.deliver).
        log_dir: where each server's stderr is copied.
        on_host: told of the tool host once there are servers (ChatSession.use_tools).
        parent: the Qt parent.

    Signals:
        status(object): a server's new ServerStatus, on the GUI thread.
        notice(str): a line for the status bar (a configuration that cannot be read).
    """

    status = Signal(object)
    notice = Signal(str)

    def __init__(self, config: McpConfig, deliver: Callable[[object], None], log_dir: Path,
                 on_host: Callable[[ToolHost], None], parent: QObject | None = None):
        super().__init__(parent)
        self.config, self._deliver, self._log_dir, self._on_host = config, deliver, log_dir, on_host
        self.relay = StatusRelay(self)
        self.relay.status.connect(self.status)
        self.store = _ConfigStore(config, self._reconfigure)
        self.servers: ToolServers | None = None
        self.dialog: ServersDialog | None = None
        self._configs: list[ServerConfig] = []
        self._reconfigure()

    def _reconfigure(self) -> None:
        """Read the configuration again; the enabled servers are the ones offered."""
        loaded = self.config.load()
        for line in loaded.errors:
            self.notice.emit(line)
        self._configs = [c for c in loaded.servers if c.enabled]
        if self.servers is None and self._configs:
            from app.mcp.servers import McpServers  # the SDK's import, once there is a server to run

            self.servers = McpServers(self._configs, on_status=self.relay.post, stderr_dir=self._log_dir)
            self._on_host(ToolHost(self.servers, self._deliver, self._allow_for_good, self._allowed_for_good))
        elif self.servers is not None:
            self.servers.configure(self._configs)

    def _allowed_for_good(self, server: str, tool: str) -> bool:
        return any(c.name == server and tool in c.always_allow for c in self._configs)

    def _allow_for_good(self, server: str, tool: str) -> None:
        try:
            self.config.allow_tool(server, tool)
        except ConfigError as exc:
            self.notice.emit(f"“Always for this tool” could not be kept: {exc}")
            return
        self._configs = [c for c in self.config.load().servers if c.enabled]

    # ------------------------------------------------------------ what the dialog and the Tools button drive

    def statuses(self) -> list[ServerStatus]:
        if self.servers is None:
            return [ServerStatus(c.name, "stopped") for c in self._configs]
        return self.servers.statuses()

    def start(self, names: Iterable[str]) -> None:
        if self.servers is not None:
            self.servers.start(names)

    def stop(self, names: Iterable[str] | None = None) -> None:
        if self.servers is not None:
            self.servers.stop(names)

    def show_dialog(self, parent: QWidget) -> ServersDialog:
        """Open (or raise) the servers dialog."""
        if self.dialog is None:
            self.dialog = ServersDialog(self.store, self, parent)
            self.status.connect(self.dialog.on_status)
        self.dialog.refresh()
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def close(self) -> None:
        """Stop every server (the window closes)."""
        if self.servers is not None:
            self.servers.close()

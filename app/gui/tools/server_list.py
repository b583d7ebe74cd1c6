"""ServerListModel: the configured MCP servers as a table: name (checked when enabled), transport, status.

The configuration (the store's `load()`) says which servers there are and in what order; the statuses (the
servers' status callback) say where each stands, and arrive one at a time, each rewriting its own row.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QGuiApplication

from app.gui.common.theme import status_colors
from app.gui.tools.server_entry import status_text, transport_text
from app.mcp.types import ServerConfig, ServerStatus

NAME, TRANSPORT, STATUS = range(3)
_HEADERS = ("Server", "Command or URL", "Status")
_Index = QModelIndex | QPersistentModelIndex


class ServerListModel(QAbstractTableModel):
    """The servers, each a row.

    Signals:
        enabled_changed(str, bool): the user checked or unchecked a server (to write to the configuration).
    """

    enabled_changed = Signal(str, bool)

    def __init__(self, parent=None):  # noqa: ANN001 (a QObject)
        super().__init__(parent)
        self.configs: list[ServerConfig] = []
        self.statuses: dict[str, ServerStatus] = {}

    def set_servers(self, configs: list[ServerConfig], statuses: list[ServerStatus]) -> None:
        self.beginResetModel()
        self.configs = list(configs)
        self.statuses = {status.name: status for status in statuses}
        self.endResetModel()

    def update_status(self, status: ServerStatus) -> None:
        """A server's new status: its row is rewritten (a server not configured is remembered, not shown)."""
        self.statuses[status.name] = status
        row = self.row_of(status.name)
        if row is not None:
            self.dataChanged.emit(self.index(row, 0), self.index(row, STATUS))

    def row_of(self, name: str) -> int | None:
        return next((row for row, config in enumerate(self.configs) if config.name == name), None)

    def status(self, row: int) -> ServerStatus | None:
        return self.statuses.get(self.configs[row].name) if 0 <= row < len(self.configs) else None

    # ------------------------------------------------------------ Qt's model interface

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 (Qt override)
        return 0 if parent.isValid() else len(self.configs)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 (Qt override)
        return 0 if parent.isValid() else len(_HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802, ANN201
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return _HEADERS[section]
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        return flags | Qt.ItemFlag.ItemIsUserCheckable if index.column() == NAME else flags

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: ANN201 (Qt's variant)
        if not index.isValid():
            return None
        config, column = self.configs[index.row()], index.column()
        status = self.statuses.get(config.name)
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return (config.name, transport_text(config), status_text(status))[column]
        if role == Qt.ItemDataRole.CheckStateRole and column == NAME:
            return Qt.CheckState.Checked if config.enabled else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.ForegroundRole and column == STATUS and status is not None:
            colors = status_colors(QGuiApplication.palette())
            return {"ready": colors.ok, "failed": colors.error, "starting": colors.warn}.get(status.state)
        return None

    def setData(self, index: _Index, value: object, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        if role != Qt.ItemDataRole.CheckStateRole or index.column() != NAME:
            return False
        enabled = Qt.CheckState(value) == Qt.CheckState.Checked if not isinstance(value, bool) else value
        config = self.configs[index.row()]
        if config.enabled == enabled:
            return False
        self.enabled_changed.emit(config.name, enabled)
        return True

    def set_enabled(self, name: str, enabled: bool) -> None:
        """The configuration took the change: the row shows it."""
        row = self.row_of(name)
        if row is not None:
            self.configs[row] = replace(self.configs[row], enabled=enabled)
            self.dataChanged.emit(self.index(row, NAME), self.index(row, NAME))

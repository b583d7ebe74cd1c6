"""ServersDialog: the MCP servers Tailor knows, and what each offers.

A table of the configured servers (enabled, command or URL, status: starting, ready with its tools, or failed
with the reason); the selected one's tools (with those left out and why) and the last lines it wrote on stderr
below. Add (a small form), Add built-in (Tailor's clock, or its reader of a folder the user picks), Remove, Test
(start it again and watch its status), Import from Claude Desktop, LM Studio, Jan or a file. It works against two protocols (protocols.py): the configuration store and the servers;
statuses come to `on_status` on the GUI thread (through a StatusRelay).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.dialogs import confirm
from app.gui.tools.add_server_dialog import AddServerDialog
from app.gui.tools.import_sources import ImportSource, import_sources
from app.gui.tools.protocols import ServerConfigStore, ServerControl
from app.gui.tools.server_list import STATUS, TRANSPORT, ServerListModel
from app.mcp.builtin.launch import builtin_config, folder_root
from app.mcp.types import BuiltinServer, ServerStatus


def tools_text(status: ServerStatus | None) -> str:
    """The tools of a server, one a line ("name — description"), then those left out and why."""
    if status is None or (not status.tools and not status.left_out):
        return "No tools yet: the server is not running." if status is None or status.state != "ready" else \
            "This server offers no tools."
    lines = [f"{tool.name} — {' '.join(tool.description.split())}" if tool.description else tool.name
             for tool in status.tools]
    if status.left_out:
        lines += ["", "Left out:", *status.left_out]
    return "\n".join(lines)


class ServersDialog(QDialog):
    """The servers, their tools and their health.

    Args:
        store: the MCP configuration.
        servers: the running servers.
        parent: the window.
        sources: where other apps keep their servers (import_sources() when None).
        ask: asks a yes/no question (Remove); common.dialogs.confirm when None.

    Signals:
        servers_changed(): servers were added, removed, enabled or disabled (the Tools button lists them).
    """

    servers_changed = Signal()

    def __init__(self, store: ServerConfigStore, servers: ServerControl, parent: QWidget | None = None,
                 sources: list[ImportSource] | None = None, ask: Callable[[str], bool] | None = None):
        super().__init__(parent)
        self.setWindowTitle("MCP servers")
        self.store, self.servers = store, servers
        self._sources = import_sources() if sources is None else sources
        self._ask = ask or (lambda text: confirm(self, "Remove the server?", text))
        self.add_dialog: AddServerDialog | None = None
        self.model = ServerListModel(self)
        self.model.enabled_changed.connect(self._set_enabled)
        self.table = self._table()
        self.reason = QLabel(wordWrap=True, textInteractionFlags=Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tools = QPlainTextEdit(readOnly=True)
        self.tools.setAccessibleName("Tools of the server")
        self.stderr = QPlainTextEdit(readOnly=True)
        self.stderr.setAccessibleName("What the server wrote on stderr")
        self.stderr.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.message = QLabel(wordWrap=True)
        self._build_layout()
        self.refresh()
        self.resize(760, 560)

    def _table(self) -> QTableView:
        table = QTableView()
        table.setModel(self.model)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.verticalHeader().hide()
        table.horizontalHeader().setSectionResizeMode(TRANSPORT, QHeaderView.ResizeMode.Stretch)
        table.horizontalHeader().setSectionResizeMode(STATUS, QHeaderView.ResizeMode.ResizeToContents)
        table.selectionModel().currentRowChanged.connect(lambda *_: self._show_selected())
        return table

    def _build_layout(self) -> None:
        self.add_button = QPushButton("Add…", clicked=self.add_server)
        self.remove_button = QPushButton("Remove", clicked=self.remove_selected)
        self.test_button = QPushButton("Test", clicked=self.test_selected)
        self.test_button.setToolTip("Start the server again and show what it offers, or why it fails")
        self.import_button = QToolButton(text="Import from…", popupMode=QToolButton.ToolButtonPopupMode.InstantPopup)
        self.import_button.setMenu(self._import_menu())
        self.builtin_button = QToolButton(text="Add built-in", popupMode=QToolButton.ToolButtonPopupMode.InstantPopup)
        self.builtin_button.setToolTip("Tailor's own servers: nothing to install")
        builtin_menu = QMenu(self)
        builtin_menu.addAction("Clock: the current time and time zones", self.add_clock)
        builtin_menu.addAction("Files in a folder (read only)…", self.add_files)
        self.builtin_button.setMenu(builtin_menu)
        buttons = QHBoxLayout()
        for button in (self.add_button, self.builtin_button, self.remove_button, self.test_button, self.import_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        details = QWidget()
        column = QVBoxLayout(details)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.reason)
        column.addWidget(QLabel("Tools"))
        column.addWidget(self.tools, 2)
        column.addWidget(QLabel("Last lines on stderr"))
        column.addWidget(self.stderr, 1)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(details)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.message)

    def _import_menu(self) -> QMenu:
        menu = QMenu(self)
        for source in self._sources:
            action = menu.addAction(source.app, lambda s=source: self.import_from(s.path))
            action.setEnabled(source.found)
            action.setToolTip(str(source.path) if source.found else f"Not found: {source.path}")
        menu.setToolTipsVisible(True)
        menu.addSeparator()
        menu.addAction("A file…", self._import_file)
        return menu

    # ------------------------------------------------------------ what is shown

    def refresh(self) -> None:
        """Read the configuration and the statuses again (keeping the selection)."""
        selected = self.selected_name()
        try:
            configs = self.store.load()
        except (OSError, ValueError) as error:
            self.say(f"The MCP configuration could not be read: {error}")
            configs = []
        self.model.set_servers(configs, self.servers.statuses())
        row = self.model.row_of(selected) if selected else None
        self.table.selectRow(0 if row is None else row)
        self._show_selected()

    def selected_name(self) -> str | None:
        row = self.table.currentIndex().row()
        return self.model.configs[row].name if 0 <= row < len(self.model.configs) else None

    @Slot(object)
    def on_status(self, status: ServerStatus) -> None:
        """A server's new status (on the GUI thread): its row, and the details when it is the selected one."""
        self.model.update_status(status)
        if status.name == self.selected_name():
            self._show_selected()

    def _show_selected(self) -> None:
        name = self.selected_name()
        row = self.model.row_of(name) if name else None
        status = self.model.status(row) if row is not None else None
        has = name is not None
        self.remove_button.setEnabled(has)
        self.test_button.setEnabled(has)
        failed = status is not None and status.state == "failed"
        self.reason.setText(f"{name} failed: {status.reason or 'no reason given'}" if failed and status else "")
        self.reason.setVisible(failed)
        self.tools.setPlainText(tools_text(status) if has else "")
        self.stderr.setPlainText(status.stderr_tail if status is not None else "")

    def say(self, text: str) -> None:
        self.message.setText(text)

    # ------------------------------------------------------------ what the user does

    def add_server(self) -> AddServerDialog:
        """Open the Add form (non-blocking); once it added a server, the server starts."""
        dialog = self.add_dialog = AddServerDialog(self.store.add, self)
        dialog.accepted.connect(lambda: self._added(dialog))
        dialog.open()
        return dialog

    def _added(self, dialog: AddServerDialog) -> None:
        if dialog.config is not None:
            self._started(dialog.config.name)

    def add_clock(self) -> None:
        """Add Tailor's clock (once: a second is only selected) and start it."""
        have = next((c.name for c in self.model.configs if c.builtin and c.builtin.kind == "clock"), None)
        if have is not None:
            self.table.selectRow(self.model.row_of(have) or 0)
            self.say(f"The clock is added already, as {have}.")
            return
        self._add_builtin("clock", BuiltinServer("clock"))

    def add_files(self) -> None:
        """Ask for a folder, then add Tailor's reader of it (named files, files-2…) and start it."""
        chosen = QFileDialog.getExistingDirectory(self, "The folder the model may read", str(Path.home()))
        if not chosen:
            return
        try:
            server = BuiltinServer("files", folder_root(chosen))
        except ValueError as error:
            self.say(f"Could not add the files server: {error}")
            return
        self._add_builtin("files", server)

    def _add_builtin(self, base: str, server: BuiltinServer) -> None:
        taken = {config.name for config in self.model.configs}
        name = next(n for n in (base, *(f"{base}-{i}" for i in range(2, len(taken) + 3))) if n not in taken)
        try:
            self.store.add(builtin_config(name, server))
        except (OSError, ValueError) as error:
            self.say(f"Could not add {name}: {error}")
            return
        self._started(name)

    def _started(self, name: str) -> None:
        """A server was added: show it selected, and start it."""
        self.refresh()
        self.table.selectRow(self.model.row_of(name) or 0)
        self.servers.start([name])
        self.say(f"Added {name}; starting it.")
        self.servers_changed.emit()

    def remove_selected(self) -> None:
        name = self.selected_name()
        if name is None or not self._ask(f"Remove the MCP server {name}? Its settings are forgotten."):
            return
        try:
            self.servers.stop([name])
            self.store.remove(name)
        except (OSError, ValueError) as error:
            self.say(f"Could not remove {name}: {error}")
            return
        self.refresh()
        self.say(f"Removed {name}.")
        self.servers_changed.emit()

    def test_selected(self) -> None:
        """Start the selected server again: its status (and tools, or why it fails) follows."""
        name = self.selected_name()
        if name is not None:
            self.servers.stop([name])
            self.servers.start([name])
            self.say(f"Starting {name}…")

    def _set_enabled(self, name: str, enabled: bool) -> None:
        try:
            self.store.set_enabled(name, enabled)
        except (OSError, ValueError) as error:
            self.say(f"Could not change {name}: {error}")
            return
        self.model.set_enabled(name, enabled)
        if not enabled:
            self.servers.stop([name])
        self.servers_changed.emit()

    def _import_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import MCP servers from", str(Path.home()),
                                              "MCP configuration (*.json);;All files (*)")
        if path:
            self.import_from(Path(path))

    def import_from(self, path: Path) -> None:
        """Add the servers of another app's file; say what was added and what was skipped."""
        try:
            added, skipped = self.store.import_from(path)
        except (OSError, ValueError) as error:
            self.say(f"Could not import from {path.name}: {error}")
            return
        parts = [f"Imported {len(added)} server{'s' if len(added) != 1 else ''}"
                 + (f" ({', '.join(added)})" if added else "")]
        if skipped:
            parts.append(f"skipped {len(skipped)} already here or not valid ({', '.join(skipped)})")
        self.say("; ".join(parts) + ".")
        self.refresh()
        if added:
            self.servers_changed.emit()

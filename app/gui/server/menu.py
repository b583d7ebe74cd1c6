"""The Server menu: serve the loaded model to other tools, or chat with a remote server.

Switching to a remote endpoint puts a RemoteEngine where the chat's EngineClient was: the
chat, the store and the window work as with the local model. The local engine process is
stopped meanwhile (its memory is freed) and started again by "Use the local model". The
status bar says "remote" where it showed memory figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction

from app.chat.model_state import Planner
from app.gui.server.endpoints_dialog import EndpointsDialog
from app.gui.server.toggle import ServerToggle
from app.remote.endpoints import EndpointStore
from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from app.services.chat_defaults import DEFAULT_N_CTX
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import PlannedLoad
from engine.interface import Engine
from engine.protocol import LoadRequest

if TYPE_CHECKING:
    from app.gui.main_window import MainWindow

NOTICE_MS = 8000
REMOTE_MEMORY = "Memory: remote"


class _NoPlan:
    """Stands in for the load planner while chatting remotely: no local file is planned."""

    def plan_load(self, path: str, settings: LoadSettings) -> PlannedLoad:
        # The server sizes its own context; Auto (None) is not a number a LoadRequest can carry.
        return PlannedLoad(LoadRequest(path, n_ctx=settings.n_ctx or DEFAULT_N_CTX), None)


class ServerMenu(QObject):
    """Builds the Server menu of `window` and owns the server and the remote switch.

    Args:
        window: the main window (its chat, status bar and labels).
        store: the saved endpoints; None uses the user's.
    """

    def __init__(self, window: MainWindow, store: EndpointStore | None = None):
        super().__init__(window)
        self.window = window
        self.session = window.session
        self._deliver = window.controller.deliver  # where a remote engine's events go
        self._store = store  # made when first needed: asking for the system keyring may take a moment
        self.toggle = ServerToggle(window.controller, parent=self)
        self.remote: RemoteEndpoint | None = None
        self._local: tuple[Engine, Planner] | None = None  # the local engine and planner, while remote
        self.dialog: EndpointsDialog | None = None
        menu = window.menuBar().addMenu("&Server")
        menu.addAction(self.toggle.action)
        menu.addSeparator()
        self.remote_action = QAction("Chat with a remote server…", self)
        self.remote_action.triggered.connect(self.show_endpoints)
        self.local_action = QAction("Use the local model", self)
        self.local_action.triggered.connect(self.use_local)
        self.local_action.setEnabled(False)
        menu.addActions([self.remote_action, self.local_action])
        self.menu = menu
        window.statusBar().addPermanentWidget(self.toggle.label)
        self.toggle.notice.connect(lambda text: window.statusBar().showMessage(text, NOTICE_MS))
        window.controller.memory.connect(self._on_memory)

    @property
    def store(self) -> EndpointStore:
        if self._store is None:
            self._store = EndpointStore()
        return self._store

    @Slot()
    def show_endpoints(self) -> EndpointsDialog:
        """Open (or raise) the list of remote servers."""
        if self.dialog is None:
            self.dialog = EndpointsDialog(self.store, self.window)
            self.dialog.remote_chosen.connect(self.use_remote)
            self.dialog.local_chosen.connect(self.use_local)
        self.dialog.refresh()
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    @Slot(object)
    def use_remote(self, endpoint: RemoteEndpoint) -> bool:
        """Chat with `endpoint`; False (with a notice) while a reply is being written."""
        if self.session.busy:
            self.window.statusBar().showMessage("Wait for the reply (or stop it) before switching.", NOTICE_MS)
            return False
        self.toggle.set_available(False)
        self.session.engine.shutdown()  # the local one: frees its model's memory while chatting remotely
        self.remote = endpoint
        # Restarting it "loads" the remote: checks that it lists the model.
        previous = self.session.use_engine(RemoteEngine(endpoint, on_event=self._deliver), _NoPlan())
        self._local = self._local or previous
        self.local_action.setEnabled(True)
        self._show_remote_status()
        return True

    @Slot()
    def use_local(self) -> bool:
        """Chat with the local model again (its engine is started and the model loaded)."""
        if self.remote is None:
            return True
        if self.session.busy:
            self.window.statusBar().showMessage("Wait for the reply (or stop it) before switching.", NOTICE_MS)
            return False
        self.session.engine.shutdown()
        self.remote = None
        self.local_action.setEnabled(False)
        self.toggle.set_available(True)
        self.window.memory_label.setText("")
        local, self._local = self._local, None
        assert local is not None  # kept when the chat went remote
        self.session.use_engine(*local)
        return True

    def shutdown(self) -> None:
        """Stop the server (the window is closing)."""
        self.toggle.stop()
        if self.dialog is not None:
            self.dialog.close()

    def _show_remote_status(self) -> None:
        self.window.memory_label.setText(REMOTE_MEMORY)
        panel = self.window.memory_page.memory
        panel.clear()
        panel.status_label.setText(f"Remote model on {self.remote.base if self.remote else ''}: "
                                   "its memory is the server's.")

    @Slot(object)
    def _on_memory(self, _report: object) -> None:
        if self.remote is not None:  # a late report of the local engine: the chat is remote now
            self._show_remote_status()

"""The Server menu: serve the loaded model to other tools, or chat with a remote server.

Switching to a remote endpoint puts a RemoteEngine where the chat's EngineClient was: the
chat, the store and the window work as with the local model. The local engine process is
stopped meanwhile (its memory is freed) and started again by "Use the local model". The
status bar says "remote" where it showed memory figures.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from app.chat.model_state import Planner
from app.gui.chat_controller import ChatController
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

REMOTE_MEMORY = "Memory: remote"


class _NoPlan:
    """Stands in for the load planner while chatting remotely: no local file is planned."""

    def plan_load(self, path: str, settings: LoadSettings) -> PlannedLoad:
        # The server sizes its own context; Auto (None) is not a number a LoadRequest can carry.
        return PlannedLoad(LoadRequest(path, n_ctx=settings.n_ctx or DEFAULT_N_CTX), None)


class ServerMenu(QObject):
    """The Server menu (`menu`, for the window's menu bar): the server of the loaded model, and the switch
    to a remote one; the server's address is `toggle.label`, for the status bar.

    Args:
        controller: the chat (its session and engine; where a remote engine's events go).
        parent: the widget the endpoints dialog opens over (the window); the menu's parent.
        store: the saved endpoints; None uses the user's.

    Signals:
        notice(str): what happened, for the status bar.
        remote_status(str): the chat runs on a remote server (said for the memory panel): its memory
            figures are the server's.
        local_status(): the chat runs on the local model again.
    """

    notice = Signal(str)
    remote_status = Signal(str)
    local_status = Signal()

    def __init__(self, controller: ChatController, parent: QWidget, store: EndpointStore | None = None):
        super().__init__(parent)
        self._parent = parent
        self.session = controller.session
        self._deliver = controller.deliver  # where a remote engine's events go
        self._store = store  # made when first needed: asking for the system keyring may take a moment
        self.toggle = ServerToggle(controller, parent=self)
        self.remote: RemoteEndpoint | None = None
        self._local: tuple[Engine, Planner] | None = None  # the local engine and planner, while remote
        self.dialog: EndpointsDialog | None = None
        self.menu = QMenu("&Server", parent)
        self.menu.addAction(self.toggle.action)
        self.menu.addSeparator()
        self.remote_action = QAction("Chat with a remote server…", self)
        self.remote_action.triggered.connect(self.show_endpoints)
        self.local_action = QAction("Use the local model", self)
        self.local_action.triggered.connect(self.use_local)
        self.local_action.setEnabled(False)
        self.menu.addActions([self.remote_action, self.local_action])
        self.toggle.notice.connect(self.notice)

    @property
    def store(self) -> EndpointStore:
        if self._store is None:
            self._store = EndpointStore()
        return self._store

    @Slot()
    def show_endpoints(self) -> EndpointsDialog:
        """Open (or raise) the list of remote servers."""
        if self.dialog is None:
            self.dialog = EndpointsDialog(self.store, self._parent)
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
            self.notice.emit("Wait for the reply (or stop it) before switching.")
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
            self.notice.emit("Wait for the reply (or stop it) before switching.")
            return False
        self.session.engine.shutdown()
        self.remote = None
        self.local_action.setEnabled(False)
        self.toggle.set_available(True)
        self.local_status.emit()
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
        self.remote_status.emit(f"Remote model on {self.remote.base if self.remote else ''}: "
                                "its memory is the server's.")

    @Slot(object)
    def show_memory(self, _report: object) -> None:
        """The engine reported its memory (the controller's `memory`, after the window showed it): while the
        chat is remote that was a late report of the local engine, and the memory shown stays the server's."""
        if self.remote is not None:
            self._show_remote_status()

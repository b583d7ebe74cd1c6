"""ServerToggle: "Serve the loaded model on 127.0.0.1:PORT", sharing the window's engine.

The server uses the window's own EngineClient (no second copy of the model): its replies are
routed by request id, so the chat never sees them and they never see the chat. It serves
whatever model the window has loaded, and answers 503 while none is.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from app.gui.chat_controller import ChatController
from app.server.config import DEFAULT_PORT, ServerConfig
from app.server.runner import ServerStartError, ServerThread
from engine.client import EngineClient
from engine.protocol import Error, Loaded, ModelInfo

log = logging.getLogger(__name__)


class ServerToggle(QObject):
    """A checkable action that starts and stops the server, and a status-bar label with its address.

    Args:
        chat: the window's chat (its engine, and its events: what is loaded).
        port: the port to listen on (loopback only; the window never serves other machines).
        parent: the Qt parent.

    Signals:
        notice(str): what happened, for the status bar (started, stopped, could not start).
    """

    notice = Signal(str)

    def __init__(self, chat: ChatController, port: int = DEFAULT_PORT, parent: QObject | None = None):
        super().__init__(parent)
        self.session = chat.session
        self.port = port
        self.server: ServerThread | None = None
        self._model: ModelInfo | None = None
        self.action = QAction(f"Serve the loaded model on 127.0.0.1:{port}", self, checkable=True)
        self.action.toggled.connect(self._toggled)
        self.label = QLabel("")
        self.label.hide()
        chat.loaded.connect(self._on_loaded)
        chat.unloaded.connect(self._forget_model)
        chat.engine_error.connect(self._on_error)

    def model_info(self) -> ModelInfo | None:
        """The model the window has loaded (read by the server's thread)."""
        return self._model

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    def set_available(self, available: bool) -> None:
        """Only a local engine can be served: off (and stopped) while the chat runs remotely."""
        if not available:
            self.action.setChecked(False)
        self.action.setEnabled(available)

    @Slot(bool)
    def _toggled(self, on: bool) -> None:
        if on and self.server is None:
            self._start()
        elif not on and self.server is not None:
            self.stop()
            self.notice.emit("Stopped serving the model.")

    def _start(self) -> None:
        client = self.session.engine
        if not isinstance(client, EngineClient):
            self.action.setChecked(False)
            return
        try:
            self.server = ServerThread(client, self.model_info, ServerConfig(port=self.port)).start()
        except (ServerStartError, OSError) as exc:
            log.warning("could not start the server: %s", exc)
            self.server = None
            self.action.setChecked(False)
            self.notice.emit(f"Could not serve the model: {exc}")
            return
        self.label.setText(f"Serving on {self.server.url}")
        self.label.setToolTip("OpenAI-compatible API of the loaded model (this machine only)")
        self.label.show()
        self.notice.emit(f"Serving the loaded model on {self.server.url}")

    def stop(self) -> None:
        """Stop serving (open streams end; their replies are cancelled)."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        self.label.hide()
        if self.action.isChecked():
            self.action.setChecked(False)

    @Slot(object)
    def _on_loaded(self, event: Loaded) -> None:
        self._model = event.info if event.info.architecture != "remote" else None

    @Slot()
    def _forget_model(self) -> None:
        self._model = None

    @Slot(object)
    def _on_error(self, event: Error) -> None:
        if event.kind in ("engine_died", "invalid_model"):
            self._model = None

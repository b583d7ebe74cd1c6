"""ServerToggle: "Serve your models on 127.0.0.1:PORT": the window's model, and the library's on demand.

The window's chat model is served from the window's own EngineClient (no second copy of it): its replies
are routed by request id, so the chat never sees them and they never see the chat. A request naming
another model of the library loads it in an engine process of the server's own, planned beside the
window's model and the others loaded (app/server/model_pool.py); idle ones go after ten minutes. What the
server holds is told every few seconds while it serves (`models_changed`), for the memory panel.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from app.gui.chat_controller import ChatController
from app.server.config import DEFAULT_PORT, DEFAULT_QUEUE_TIMEOUT_S, ServerConfig
from app.server.library_pool import library_pool
from app.server.model_pool import DEFAULT_TTL_S, ModelPool
from app.server.runner import ServerStartError, ServerThread
from app.services.load_settings import LoadSettings
from app.services.paths import AppPaths
from engine.client import EngineClient
from engine.protocol import DEFAULT_PARALLEL, Error, Loaded, ModelInfo

POLL_MS = 2000  # how often the memory panel hears what the server holds

log = logging.getLogger(__name__)


class ServerToggle(QObject):
    """A checkable action that starts and stops the server, and a status-bar label with its address.

    Args:
        chat: the window's chat (its engine, and its events: what is loaded).
        port: the port to listen on (loopback only; the window never serves other machines).
        parent: the Qt parent.

    Signals:
        notice(str): what happened, for the status bar (started, stopped, could not start).
        models_changed(list): the models the server holds besides the window's (LoadedModel), while it serves.
    """

    notice = Signal(str)
    models_changed = Signal(list)

    def __init__(self, chat: ChatController, port: int = DEFAULT_PORT, parent: QObject | None = None):
        super().__init__(parent)
        self.session = chat.session
        self.port = port
        self.server: ServerThread | None = None
        self.pool: ModelPool | None = None
        self._model: ModelInfo | None = None
        self._held: list = []
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._tell_models)
        self.action = QAction(f"Serve your models on 127.0.0.1:{port}", self, checkable=True)
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
        # Planned on the machine as the window's planner read it before its first load: the window's model
        # then counts once, by its forecast (attach), like every model the server loads beside it.
        pool = library_pool(AppPaths.default(), LoadSettings(), lambda: [self._model.path] if self._model else [],
                            DEFAULT_TTL_S, DEFAULT_QUEUE_TIMEOUT_S, DEFAULT_PARALLEL,
                            profile=self.session.model.planner.profile, log_name="engine-server")
        try:
            self.server = ServerThread(None, None, ServerConfig(port=self.port), router=pool).start()
        except (ServerStartError, OSError) as exc:
            log.warning("could not start the server: %s", exc)
            self.server = None
            self.action.setChecked(False)
            self.notice.emit(f"Could not serve the model: {exc}")
            return
        self.pool = pool
        self._attach()
        self._poll.start()
        self.label.setText(f"Serving on {self.server.url}")
        self.label.setToolTip("OpenAI-compatible API (and Anthropic's, Ollama's) of the loaded model and of "
                              "the library's models, loaded on demand (this machine only)")
        self.label.show()
        self.notice.emit(f"Serving your models on {self.server.url}")

    def stop(self) -> None:
        """Stop serving (open streams end; their replies are cancelled; the models it loaded are unloaded)."""
        server, self.server, self.pool = self.server, None, None
        self._poll.stop()
        if server is not None:
            server.stop()
        self._tell_models()
        self.label.hide()
        if self.action.isChecked():
            self.action.setChecked(False)

    def _attach(self) -> None:
        """Serve the window's model (or stop serving the one it no longer has) as one of the pool's."""
        if self.pool is None:
            return
        client = self.session.engine
        if self._model is not None and isinstance(client, EngineClient):
            self.pool.attach(self._model.path, client, self.model_info, self.session.model.plan)
        else:
            self.pool.detach()

    @Slot()
    def _tell_models(self) -> None:
        held = [m for m in self.pool.loaded() if not (self._model and m.model.path == self._model.path)] \
            if self.pool is not None else []
        if held or self._held:
            self.models_changed.emit(held)
        self._held = held

    @Slot(object)
    def _on_loaded(self, event: Loaded) -> None:
        self._model = event.info if event.info.architecture != "remote" else None
        self._attach()

    @Slot()
    def _forget_model(self) -> None:
        self._model = None
        self._attach()

    @Slot(object)
    def _on_error(self, event: Error) -> None:
        if event.kind in ("engine_died", "invalid_model"):
            self._model = None
            self._attach()

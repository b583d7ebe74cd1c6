"""EngineBridge: the EngineClient seen from Qt.

The client calls back on its reader thread; this object turns each event into a Qt signal
that is delivered, queued, on the GUI thread. Nothing here touches a widget.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.load_planner import LoadPlanner, LoadSettings
from engine.client import EngineClient, EngineNotRunning
from engine.protocol import (
    ChatMessage,
    Done,
    Error,
    Event,
    Loaded,
    MemoryReport,
    SamplingParams,
    Token,
    Unloaded,
)
from models.plan import Plan

log = logging.getLogger(__name__)


class EngineBridge(QObject):
    """Owns one EngineClient and relays its events as Qt signals on the GUI thread.

    Args:
        log_path: file for the engine process's log.
        client: an object with EngineClient's methods to use instead of a new EngineClient
            (the UI benchmark feeds scripted events through it); its events go to `deliver`.
        parent: the Qt parent.

    Signals:
        loaded(object): a `Loaded` event: the model is ready.
        unloaded(): the model was unloaded.
        token(int, str): request id and a piece of a reply.
        done(object): a `Done` event: a reply ended (finished, cut at max tokens or cancelled).
        error(object): an `Error` event (invalid_model, engine_died, ...); also emitted when a
            request cannot be sent because the engine process is gone.
        memory(object): a `MemoryReport` event.
        planned(object): the `Plan` a load follows (None when the file's header is unreadable;
            the engine then reports why).
    """

    loaded = Signal(object)
    unloaded = Signal()
    token = Signal(int, str)
    done = Signal(object)
    error = Signal(object)
    memory = Signal(object)
    planned = Signal(object)
    _event = Signal(object)

    def __init__(
        self,
        log_path: Path | None = None,
        client: Any = None,
        parent: QObject | None = None,
        planner: LoadPlanner | None = None,
    ):
        super().__init__(parent)
        self.planner = planner or LoadPlanner()
        self.plan: Plan | None = None
        self.client = client if client is not None else EngineClient(on_event=self.deliver, log_path=log_path)
        # Queued even when emitted on the GUI thread, so events are handled in arrival order.
        self._event.connect(self._dispatch, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------ reader thread side

    def deliver(self, event: Event) -> None:
        """Hand an event over to the GUI thread (safe to call from any thread)."""
        try:
            self._event.emit(event)
        except RuntimeError:  # the bridge was deleted while the reader thread still ran
            log.debug("event after the bridge was deleted: %r", event)

    @Slot(object)
    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Token):
            self.token.emit(event.request_id, event.text)
        elif isinstance(event, Done):
            self.done.emit(event)
        elif isinstance(event, Error):
            self.error.emit(event)
        elif isinstance(event, Loaded):
            self.loaded.emit(event)
        elif isinstance(event, MemoryReport):
            self.memory.emit(event)
        elif isinstance(event, Unloaded):
            self.unloaded.emit()

    # ------------------------------------------------------------ requests (GUI thread)

    @property
    def running(self) -> bool:
        return bool(self.client.running)

    @property
    def pid(self) -> int | None:
        return self.client.pid

    def start(self) -> None:
        """Start the engine process if it is not running."""
        if not self.client.running:
            self.client.start()

    def restart(self) -> None:
        """Start a new engine process (after the old one died)."""
        self.client.restart()

    def load(self, path: str, settings: LoadSettings) -> bool:
        """Ask for a model, loaded as the decision tree plans it; False (and an `error`) when the engine is gone."""
        planned = self.planner.plan_load(str(path), settings)
        self.plan = planned.plan
        self.planned.emit(planned.plan)
        return self._call(self.client.load, planned.request) is not None

    def generate(self, messages: list[ChatMessage], sampling: SamplingParams) -> int | None:
        """Start a reply; its request id, or None (and an `error`) when the engine is gone."""
        return self._call(self.client.generate, messages, sampling)

    def cancel(self, request_id: int) -> None:
        with contextlib.suppress(EngineNotRunning):  # a dead engine generates nothing more
            self.client.cancel(request_id)

    def shutdown(self) -> None:
        self.client.shutdown()

    def _call(self, method: Any, *args: Any) -> Any:
        try:
            result = method(*args)
        except EngineNotRunning as exc:
            # Through the queue, so the caller is never re-entered from inside its own call.
            self.deliver(Error("engine_died", f"The engine is not running ({exc})."))
            return None
        return True if result is None else result

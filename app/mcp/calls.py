"""One tool call in flight: its outcome goes to `on_done` exactly once, whatever ends it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio

from app.mcp.types import ToolOutcome


class PendingCall:
    """A call between `McpServers.call` and its outcome.

    `cancel()` may come from any thread; everything else runs on the loop thread.
    """

    def __init__(self, tool: str, on_done: Callable[[ToolOutcome], None]):
        self.tool = tool
        self.started = time.monotonic()
        self.scope: anyio.CancelScope | None = None  # made by the call's task (anyio needs one running)
        self.cancel_requested = False
        self._on_done = on_done
        self._lock = threading.Lock()
        self._finished = False

    def finish(self, ok: bool, text: str, *, cancelled: bool = False) -> None:
        """Hand the outcome to on_done, unless it already has one."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
        self._on_done(ToolOutcome(ok=ok, text=text, seconds=time.monotonic() - self.started, cancelled=cancelled))

    def cancel(self) -> None:
        """Stop waiting for the call (on the loop thread); the SDK tells the server it is cancelled."""
        self.cancel_requested = True
        if self.scope is not None:
            self.scope.cancel()

    def finish_cancelled(self) -> None:
        self.finish(False, f"{self.tool}: cancelled", cancelled=True)

    @property
    def finished(self) -> bool:
        return self._finished

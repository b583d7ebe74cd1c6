"""The progress of the engine's loads, on its way to the client, and the cancels that stop them.

The engine host's request reader (a thread beside the main loop) counts the loads it takes off the
pipe and the cancels; the main thread, loading, reports through `report`, whose answer tells the
backend whether to go on. A cancel stops every load taken before it: the one running and any queued
behind running replies, never a later one. llama.cpp calls back once per tensor (hundreds of times a
second on a small model), so what reaches the client is thinned to steps of 2 % or 100 ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.backend import BackendError
from engine.protocol import CancelLoadRequest, LoadProgress, LoadRequest, LoadStage

# (fraction of the stage, stage) -> whether the load goes on; what the host hands each backend.
ProgressFn = Callable[[float, LoadStage], bool]

MIN_STEP = 0.02
MIN_INTERVAL_S = 0.1


class LoadWatch:
    """Counts loads and cancels (reader thread) and reports the running load's progress (main thread).

    Args:
        send: sends an event to the client (thread-safe).
        clock: seconds, for the 100 ms step (tests pass their own).
    """

    def __init__(self, send: Callable[[LoadProgress], None], clock: Callable[[], float] = time.monotonic):
        self._send, self._clock = send, clock
        self._lock = threading.Lock()
        self._taken = 0  # loads the reader took off the pipe
        self._cancelled_upto = 0  # loads 1.._cancelled_upto are cancelled
        self._running = 0  # the number of the load running now (0: none yet)
        self._last: tuple[float, LoadStage] | None = None  # what the client heard last of this load
        self._last_at = 0.0

    # ------------------------------------------------------------ the request reader's side

    def heard(self, request: object) -> bool:
        """The reader's look at a request off the pipe: a load is counted (loads run in that order, so its
        number is the count); a cancel of loads takes effect now. True: a cancel, nothing left to do."""
        if isinstance(request, CancelLoadRequest):
            self.cancel()
            return True
        if isinstance(request, LoadRequest):
            with self._lock:
                self._taken += 1
        return False

    def cancel(self) -> None:
        """Cancel every load taken so far."""
        with self._lock:
            self._cancelled_upto = self._taken

    # ------------------------------------------------------------ the main thread's side

    def begin(self) -> None:
        """The next load starts: the client hears it at 0."""
        with self._lock:
            self._running += 1
        self._last = None
        self.report(0.0, "reading")

    @property
    def cancelled(self) -> bool:
        """Whether the running load was cancelled."""
        with self._lock:
            return 0 < self._running <= self._cancelled_upto

    def check(self, path: str, close: Callable[[], None]) -> None:
        """At the end of a load: if it was cancelled meanwhile, `close` what it loaded and raise its error."""
        if self.cancelled:
            close()
            raise BackendError("load_cancelled", f"Loading {Path(path).name} was cancelled.")

    def report(self, fraction: float, stage: LoadStage) -> bool:
        """How far the running load got; whether it goes on (False once cancelled)."""
        fraction = min(1.0, max(0.0, fraction))
        last, now = self._last, self._clock()
        if last is None or stage != last[1] or self._worth_saying(fraction, last[0], now):
            self._last, self._last_at = (fraction, stage), now
            self._send(LoadProgress(fraction, stage))
        return not self.cancelled

    def _worth_saying(self, fraction: float, last: float, now: float) -> bool:
        if fraction < last:  # a try with fewer GPU layers starts again
            return True
        if fraction >= 1.0 > last:  # the end of a stage is always heard
            return True
        return fraction - last >= MIN_STEP or (fraction > last and now - self._last_at >= MIN_INTERVAL_S)

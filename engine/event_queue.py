"""Events read in order by callers that pass no callback: the CLI, tests, and the server.

EngineClient (the local engine process) and RemoteEngine (an OpenAI-compatible server) both
put their events here when nobody takes them as they come.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from queue import Empty, Queue

from engine.protocol import Done, Error, Event

# A blocked wait wakes this often. The kernel may hand a process's SIGINT to any of its threads; a
# main thread blocked in the queue's lock without a deadline would then never run the Python handler
# (Ctrl+C in `tailor chat` did nothing while the model loaded, now and then).
WAKE_S = 0.1


class EventQueue:
    def __init__(self) -> None:
        self._queue: Queue[Event] = Queue()

    def put(self, event: Event) -> None:
        self._queue.put(event)

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next queued event, or None after `timeout` seconds (None: wait for one)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = WAKE_S if deadline is None else min(WAKE_S, deadline - time.monotonic())
            try:
                return self._queue.get(timeout=max(0.0, wait))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    return None

    def stream(self, request_id: int) -> Iterator[Event]:
        """Yield queued events of one reply (and engine-wide errors) until it ends."""
        while True:
            event = self.next_event()
            if getattr(event, "request_id", request_id) not in (request_id, None):
                continue
            yield event
            if isinstance(event, Done | Error):
                return

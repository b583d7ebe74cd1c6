"""Events read in order by callers that pass no callback: the CLI, tests, and the server.

EngineClient (the local engine process) and RemoteEngine (an OpenAI-compatible server) both
put their events here when nobody takes them as they come.
"""

from __future__ import annotations

from collections.abc import Iterator
from queue import Empty, Queue

from engine.protocol import Done, Error, Event


class EventQueue:
    def __init__(self) -> None:
        self._queue: Queue[Event] = Queue()

    def put(self, event: Event) -> None:
        self._queue.put(event)

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next queued event, or None after `timeout` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except Empty:
            return None

    def stream(self, request_id: int) -> Iterator[Event]:
        """Yield queued events of one reply (and engine-wide errors) until it ends."""
        while True:
            event = self._queue.get()
            if getattr(event, "request_id", request_id) not in (request_id, None):
                continue
            yield event
            if isinstance(event, Done | Error):
                return

"""Small helpers for driving a real EngineClient in tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.client import EngineClient
from engine.protocol import Done, Error, Event, GenerateRequest, Loaded, LoadRequest, MemoryReport, Token


@dataclass
class Reply:
    tokens: list[str] = field(default_factory=list)
    end: Done | Error | None = None
    memory: list[MemoryReport] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.tokens)


def wait_for(client: EngineClient, kinds: tuple[type, ...], timeout: float = 60.0) -> Event:
    """The next event of one of `kinds` (errors always count), or AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        event = client.next_event(timeout=left)
        if isinstance(event, (*kinds, Error)):
            return event
    raise AssertionError(f"no {kinds} event within {timeout}s")


def load(client: EngineClient, path: str, n_ctx: int = 2048) -> Loaded | Error:
    client.load(LoadRequest(path, n_ctx=n_ctx))
    return wait_for(client, (Loaded,))


def collect(client: EngineClient, request_id: int, timeout: float = 120.0) -> Reply:
    reply = Reply()
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        event = client.next_event(timeout=left)
        if isinstance(event, Token) and event.request_id == request_id:
            reply.tokens.append(event.text)
        elif isinstance(event, MemoryReport):
            reply.memory.append(event)
        elif isinstance(event, Done | Error) and getattr(event, "request_id", request_id) in (request_id, None):
            reply.end = event
            return reply
    raise AssertionError(f"reply {request_id} did not end within {timeout}s")


def reply(backend, messages, sampling) -> Done:
    """One reply from a backend in the test's own process, its text streamed nowhere."""
    return backend.generate(GenerateRequest(1, tuple(messages), sampling), lambda _t: None, lambda: False)

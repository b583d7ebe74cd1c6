"""The engine host's work after a reply (the backend's idle work: next_turn.py) waits for a request that
comes at once, and gives way to one that comes while it runs (engine/host.py), in the
test's own process with a scripted backend: the order of what the host asked of it is the assertion."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import pytest

import engine.host
from engine.host import EngineHost
from engine.protocol import (
    ChatMessage,
    Done,
    Event,
    GenerateRequest,
    GenerationStats,
    MemoryReport,
    ShutdownRequest,
)

WAIT_S = 30.0  # a bound that only a broken host reaches


class ScriptedBackend:
    """One reply at a time, ended by its first step; `idle` blocks until the host says a request waits,
    where `hold_idle` is set (the first call only)."""

    def __init__(self, hold_idle: bool = False):
        self.log: list[str] = []
        self.idle_calls = threading.Semaphore(0)
        self._hold_idle = hold_idle
        self._running: list[int] = []

    @property
    def free_slots(self) -> int:
        return 0 if self._running else 1

    @property
    def running(self) -> bool:
        return bool(self._running)

    def submit(self, request: GenerateRequest, emit: Callable[..., None], cancelled: Callable[[], bool]) -> None:
        self.log.append(f"start {request.request_id}")
        self._running.append(request.request_id)
        emit("x")

    def step(self) -> list[tuple[int, Done]]:
        ended, self._running = self._running, []
        self.log.extend(f"end {rid}" for rid in ended)
        return [(rid, Done(rid, "x", "stop", GenerationStats(0.0, 1, 0, 1, 0.0, 0.0))) for rid in ended]

    def idle(self, interrupted: Callable[[], bool] = lambda: False) -> int:
        self.log.append("idle")
        self.idle_calls.release()
        if self._hold_idle:
            self._hold_idle = False
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:  # a chunk of warm-up after another, until a request waits
                if interrupted():
                    self.log.append("idle gave way")
                    return 1
                time.sleep(0.001)
        return 0

    def memory(self) -> MemoryReport:
        self.log.append("memory")
        return MemoryReport((), 0, 0)

    def close(self) -> None:
        pass


@pytest.fixture
def host_of() -> Iterator[Callable[[ScriptedBackend], tuple[Connection, Connection]]]:
    """Serve a scripted backend on a thread; (requests to send, events to read)."""
    threads: list[tuple[threading.Thread, Connection]] = []

    def start(backend: ScriptedBackend) -> tuple[Connection, Connection]:
        requests_in, requests_out = Pipe(duplex=False)
        events_in, events_out = Pipe(duplex=False)
        host = EngineHost(events_out)
        host._backend = backend  # noqa: SLF001 - loaded, as after a LoadRequest
        thread = threading.Thread(target=host.serve, args=(requests_in,), daemon=True)
        thread.start()
        threads.append((thread, requests_out))
        return requests_out, events_in

    yield start
    for thread, requests in threads:
        requests.send(ShutdownRequest())
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the host did not stop"


def _ask(requests: Connection, rid: int) -> None:
    requests.send(GenerateRequest(rid, (ChatMessage("user", "Hi"),)))


def _until_done(events: Connection, rid: int) -> list[Event]:
    seen = []
    while events.poll(WAIT_S):
        seen.append(events.recv())
        if isinstance(seen[-1], Done) and seen[-1].request_id == rid:
            return seen
    raise AssertionError(f"reply {rid} did not end: {seen}")


def test_a_request_right_after_a_reply_starts_before_the_after_reply_work(host_of, monkeypatch):
    monkeypatch.setattr(engine.host, "AFTER_REPLY_GRACE_S", WAIT_S)  # however slow the test's turn-around
    backend = ScriptedBackend()
    requests, events = host_of(backend)
    _ask(requests, 1)
    _until_done(events, 1)
    _ask(requests, 2)
    _until_done(events, 2)
    steps = [entry for entry in backend.log if entry != "memory"]
    assert steps == ["start 1", "end 1", "start 2", "end 2"]  # no idle work between


def test_with_no_request_the_reply_is_reported_then_the_idle_work_done(host_of, monkeypatch):
    monkeypatch.setattr(engine.host, "AFTER_REPLY_GRACE_S", 0.0)
    backend = ScriptedBackend()
    requests, events = host_of(backend)
    _ask(requests, 1)
    _until_done(events, 1)
    assert events.poll(WAIT_S) and isinstance(events.recv(), MemoryReport)  # the reply's end, reported once idle
    assert backend.idle_calls.acquire(timeout=WAIT_S)
    assert backend.log[:4] == ["start 1", "end 1", "memory", "idle"]


def test_idle_work_gives_way_to_a_request_and_goes_on_after_it(host_of, monkeypatch):
    monkeypatch.setattr(engine.host, "AFTER_REPLY_GRACE_S", 0.0)
    backend = ScriptedBackend(hold_idle=True)
    requests, events = host_of(backend)
    _ask(requests, 1)
    _until_done(events, 1)
    assert backend.idle_calls.acquire(timeout=WAIT_S)  # the warm-up runs, until...
    _ask(requests, 2)  # ...a request comes
    _until_done(events, 2)
    assert backend.idle_calls.acquire(timeout=WAIT_S)  # what was left is taken up once idle again
    steps = [entry for entry in backend.log if entry != "memory"]
    assert steps == ["start 1", "end 1", "idle", "idle gave way", "start 2", "end 2", "idle"]

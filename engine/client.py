"""EngineClient: starts the engine process and talks to it.

The model never lives in the caller's process: llama.cpp aborts the whole process on
many errors, and a crash there must not take the window (or a script) down with it.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path

from engine.event_queue import EventQueue
from engine.interface import EngineNotRunning
from engine.protocol import (
    CancelLoadRequest,
    CancelRequest,
    ChatMessage,
    CountTokensRequest,
    Done,
    Embeddings,
    EmbedRequest,
    Error,
    Event,
    GenerateRequest,
    LoadRequest,
    ReplyShape,
    Request,
    SamplingParams,
    ShutdownRequest,
    TokenCount,
    UnloadRequest,
)

log = logging.getLogger(__name__)

# How often the reader wakes to notice a dead child even if the pipe stays silent.
_POLL_S = 0.25


class EngineClient:
    """Owns one engine child process and relays its events.

    Args:
        on_event: called with every event, on the client's reader thread. When None,
            events are queued and read with `next_event` / `stream`.
        log_path: file the engine process (and llama.cpp) log to; None keeps its logs off
            the terminal all the same.
    """

    def __init__(self, on_event: Callable[[Event], None] | None = None, log_path: Path | None = None):
        self._queue = EventQueue()
        self._on_event = on_event or self._queue.put
        self._log_path = log_path
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self._process: multiprocessing.process.BaseProcess | None = None
        self._requests: Connection | None = None
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        # Replies whose events go to their own handler (the server's requests) instead of on_event.
        self._routes: dict[int, Callable[[Event], None]] = {}
        self._routes_lock = threading.Lock()

    # ------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.is_alive() and not self._stopping.is_set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start a fresh engine process (no model loaded). A running one is shut down first."""
        if self._process is not None:
            self.shutdown()
        from engine.host import run_engine  # the child imports it again after spawn

        ctx = multiprocessing.get_context("spawn")
        req_read, req_write = ctx.Pipe(duplex=False)
        evt_read, evt_write = ctx.Pipe(duplex=False)
        log_path = str(self._log_path) if self._log_path else None
        process = ctx.Process(
            target=run_engine, args=(req_read, evt_write, log_path), name="tailor-engine", daemon=True
        )
        process.start()
        # Close our copies of the child's ends, so a dead child reads as EOF here.
        req_read.close()
        evt_write.close()
        self._stopping = threading.Event()
        self._process, self._requests = process, req_write
        self._reader = threading.Thread(
            target=self._read_events, args=(process, evt_read, self._stopping), name="engine-reader", daemon=True
        )
        self._reader.start()

    def restart(self) -> None:
        """Start a new engine process after the old one died or hung."""
        self.start()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the engine to exit; kill it if it does not within `timeout` seconds."""
        process, reader = self._process, self._reader
        if process is None:
            return
        self._stopping.set()
        try:
            self._send(ShutdownRequest())
        except EngineNotRunning:
            pass
        deadline = time.monotonic() + timeout
        process.join(timeout)
        # The reader thread joins the process too: when it reaps it first, this thread's waitpid fails and
        # is_alive says True until the reader has stored the exit code. Look again before calling it hung.
        while process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if process.is_alive():
            log.warning("engine did not exit in %.1fs; killing it", timeout)
            process.kill()
            process.join(2.0)
        if self._requests is not None:
            self._requests.close()
        if reader is not None and reader is not threading.current_thread():
            reader.join(2.0)
        self._process = self._requests = self._reader = None
        self._end_routes("The engine was shut down.")

    # ------------------------------------------------------------ requests

    def load(self, request: LoadRequest) -> None:
        """Load a model; answered by `LoadProgress` events, then `Loaded` or `Error(kind="invalid_model")`."""
        self._send(request)

    def cancel_load(self) -> None:
        """Stop the loads asked for so far: each ends with `Error(kind="load_cancelled")` (no model is loaded
        then), or with its `Loaded` when it ended before the cancel arrived."""
        self._send(CancelLoadRequest())

    def generate(
        self,
        messages: list[ChatMessage] | tuple[ChatMessage, ...],
        sampling: SamplingParams,
        *,
        prompt: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        shape: ReplyShape | None = None,
    ) -> int:
        """Start a reply; returns its request id. Answered by `Token`s then `Done` or `Error`.

        Args:
            prompt: a raw prompt to continue without the chat template (then `messages` is unused).
            on_event: receives this reply's events (on the reader thread) instead of the client's
                own handler, so several users of one engine never see each other's replies. An
                engine that dies or shuts down ends the reply with an `Error` there too.
        """
        request_id = next(self._ids)
        if on_event is not None:
            with self._routes_lock:  # before sending: the first event may come back at once
                self._routes[request_id] = on_event
        try:
            self._send(GenerateRequest(request_id, tuple(messages), sampling, prompt, shape or ReplyShape()))
        except EngineNotRunning:
            with self._routes_lock:
                self._routes.pop(request_id, None)
            raise
        return request_id

    def count_tokens(
        self, messages: Sequence[ChatMessage], shape: ReplyShape | None = None, *,
        on_event: Callable[[Event], None] | None = None,
    ) -> int:
        """Ask how many tokens the prompt of `messages` takes (rendered for `shape`, nothing decoded); its request
        id. Answered by `TokenCount` or an `Error`, to `on_event` when given (as `generate` routes a reply).

        Raises:
            EngineNotRunning: the engine is gone.
        """
        request_id = next(self._ids)
        if on_event is not None:
            with self._routes_lock:
                self._routes[request_id] = on_event
        try:
            self._send(CountTokensRequest(request_id, tuple(messages), shape or ReplyShape()))
        except EngineNotRunning:
            with self._routes_lock:
                self._routes.pop(request_id, None)
            raise
        return request_id

    def embed(self, inputs: Sequence[str | Sequence[int]], normalize: bool = True, *, truncate: bool = False,
              on_event: Callable[[Event], None] | None = None) -> int:
        """Ask for one vector per input (text, or the model's token ids; `truncate`: one too long is cut); its
        request id. Answered by `Embeddings` or an `Error`, to `on_event` when given (as `generate` routes a
        reply); `cancel` ends it between two batches with Error(kind="cancelled").

        Raises:
            EngineNotRunning: the engine is gone.
        """
        request_id = next(self._ids)
        items = tuple(i if isinstance(i, str) else tuple(i) for i in inputs)
        if on_event is not None:
            with self._routes_lock:
                self._routes[request_id] = on_event
        try:
            self._send(EmbedRequest(request_id, items, normalize, truncate))
        except EngineNotRunning:
            with self._routes_lock:
                self._routes.pop(request_id, None)
            raise
        return request_id

    def cancel(self, request_id: int) -> None:
        """Stop a reply early; its `Done` comes with finish_reason "cancelled"."""
        self._send(CancelRequest(request_id))

    def unload(self) -> None:
        self._send(UnloadRequest())

    # ------------------------------------------------------------ queued events (no callback)

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next queued event, or None after `timeout` seconds."""
        return self._queue.next_event(timeout)

    def stream(self, request_id: int) -> Iterator[Event]:
        """Yield queued events of one reply (and engine-wide errors) until it ends."""
        return self._queue.stream(request_id)

    # ------------------------------------------------------------ internals

    def _send(self, request: Request) -> None:
        with self._send_lock:
            if self._requests is None or self._process is None or not self._process.is_alive():
                raise EngineNotRunning("the engine process is not running")
            try:
                self._requests.send(request)
            except (BrokenPipeError, OSError) as exc:
                raise EngineNotRunning(f"the engine process is not running ({exc})") from exc

    def _read_events(
        self, process: multiprocessing.process.BaseProcess, events: Connection, stopping: threading.Event
    ) -> None:
        """Relay events until the child exits; report an unexpected exit as engine_died."""
        try:
            while True:
                ready = wait([events, process.sentinel], timeout=_POLL_S)
                if events in ready:
                    try:
                        self._deliver(events.recv())
                    except EOFError:
                        break
                    continue
                if process.sentinel in ready:
                    # Drain what the child sent before it went.
                    while events.poll(0):
                        try:
                            self._deliver(events.recv())
                        except EOFError:
                            break
                    break
        finally:
            events.close()
        process.join(1.0)
        if not stopping.is_set():
            self._deliver(Error("engine_died", _describe_exit(process.exitcode)))

    def _deliver(self, event: Event) -> None:
        """Hand an event to its reply's own handler, or to the client's."""
        request_id = getattr(event, "request_id", None)
        if request_id is not None:
            with self._routes_lock:
                handler = self._routes.get(request_id)
                if handler is not None and isinstance(event, Done | Error | TokenCount | Embeddings):
                    del self._routes[request_id]
            if handler is not None:
                handler(event)
                return
        elif isinstance(event, Error) and event.kind == "engine_died":
            self._end_routes(event.message)
        self._on_event(event)

    def _end_routes(self, message: str) -> None:
        """End every routed reply still open: the engine that would have answered is gone."""
        with self._routes_lock:
            routes, self._routes = self._routes, {}
        for request_id, handler in routes.items():
            handler(Error("engine_died", message, request_id))


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "The engine process stopped answering."
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"The engine process was stopped by {name}."
    return f"The engine process exited unexpectedly (code {exitcode})."

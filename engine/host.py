"""The engine process: owns one loaded model, runs generation, reports events and memory.

Started by EngineClient with multiprocessing (spawn). A reader thread takes requests off
the pipe so a Cancel reaches the generation loop between two tokens; everything else is
handled in order on the main thread.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from queue import Queue

from engine.backend import Backend, BackendError
from engine.protocol import (
    CancelRequest,
    Error,
    Event,
    GenerateRequest,
    Loaded,
    LoadRequest,
    Request,
    ShutdownRequest,
    Token,
    Unloaded,
    UnloadRequest,
)

log = logging.getLogger("engine.host")

# While a reply streams, memory is reported at most this often.
MEMORY_REPORT_INTERVAL_S = 0.5
# Streamed text is sent in pieces at most this often: no eye sees faster updates, and on
# a machine with few cores every wake-up of the client steals time from llama.cpp's threads.
TOKEN_FLUSH_INTERVAL_S = 0.025


def run_engine(requests: Connection, events: Connection, log_path: str | None) -> None:
    """Entry point of the engine child process."""
    _configure_logging(log_path)
    host = EngineHost(events)
    code = 0
    try:
        host.serve(requests)
    except BaseException:
        log.exception("the engine host failed")
        code = 1
    finally:
        host.close()
        logging.shutdown()
        # Skip interpreter finalization: llama.cpp's static destructors may call back into
        # Python (its log callback) while the interpreter is going away, which can hang the
        # exit. Everything the process holds was released above or belongs to the OS.
        os._exit(code)


class EngineHost:
    """Serves requests from one client; sends events back on `events`."""

    def __init__(self, events: Connection):
        self._events = events
        self._send_lock = threading.Lock()
        self._backend: Backend | None = None
        self._inbox: Queue[Request | None] = Queue()
        self._cancelled: set[int] = set()
        self._cancel_lock = threading.Lock()
        self._log_bridge = None
        self._client_gone = threading.Event()

    def serve(self, requests: Connection) -> None:
        threading.Thread(target=self._receive, args=(requests,), name="engine-requests", daemon=True).start()
        while True:
            request = self._inbox.get()
            if request is None or isinstance(request, ShutdownRequest):
                return
            try:
                self._handle(request)
            except BackendError as exc:
                self._send(Error(exc.kind, str(exc), getattr(request, "request_id", None)))  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - report, keep serving
                log.exception("request %r failed", request)
                self._send(Error("internal", f"{type(exc).__name__}: {exc}", getattr(request, "request_id", None)))

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # ------------------------------------------------------------ requests

    def _receive(self, requests: Connection) -> None:
        """Pipe reader: cancels take effect at once, the rest queue up in order."""
        while True:
            try:
                request = requests.recv()
            except (EOFError, OSError):
                # The client is gone: end the reply in progress and stop serving.
                self._client_gone.set()
                self._inbox.put(None)
                return
            if isinstance(request, CancelRequest):
                with self._cancel_lock:
                    self._cancelled.add(request.request_id)
            else:
                self._inbox.put(request)

    def _handle(self, request: Request) -> None:
        if isinstance(request, LoadRequest):
            self._load(request)
        elif isinstance(request, GenerateRequest):
            self._generate(request)
        elif isinstance(request, UnloadRequest):
            self.close()
            self._send(Unloaded())

    def _load(self, request: LoadRequest) -> None:
        self.close()
        t0 = time.perf_counter()
        backend = self._new_backend()
        info = backend.load(request)
        self._backend = backend
        self._send(Loaded(info, time.perf_counter() - t0))
        self._send(backend.memory())

    def _generate(self, request: GenerateRequest) -> None:
        backend = self._backend
        if backend is None:
            raise BackendError("no_model", "No model is loaded.")
        rid = request.request_id
        pending: list[str] = []
        last_flush = last_report = time.monotonic()

        def flush() -> None:
            if pending:
                self._send(Token(rid, "".join(pending)))
                pending.clear()

        def emit(text: str) -> None:
            nonlocal last_flush, last_report
            pending.append(text)
            now = time.monotonic()
            if now - last_flush >= TOKEN_FLUSH_INTERVAL_S:
                last_flush = now
                flush()
            if now - last_report >= MEMORY_REPORT_INTERVAL_S:
                last_report = now
                self._send(backend.memory())

        def cancelled() -> bool:
            if self._client_gone.is_set():
                return True
            with self._cancel_lock:
                return rid in self._cancelled

        try:
            done = backend.generate(request, emit, cancelled)
        finally:
            flush()
            with self._cancel_lock:
                self._cancelled.discard(rid)
        self._send(done)
        self._send(backend.memory())

    def _new_backend(self) -> Backend:
        """A backend for the next model (GGUF only until the PyTorch engine exists)."""
        # Imported here: llama_cpp is loaded only inside the engine process.
        from engine.gguf.backend import GgufBackend
        from engine.gguf.log_bridge import LlamaLogBridge

        if self._log_bridge is None:  # llama.cpp has one process-wide log callback
            self._log_bridge = LlamaLogBridge()
        return GgufBackend(self._log_bridge)

    def _send(self, event: Event) -> None:
        with self._send_lock:
            try:
                self._events.send(event)
            except (BrokenPipeError, OSError):
                pass  # the client went away; the reader thread will end the loop


def _configure_logging(log_path: str | None) -> None:
    """Send the engine's logs (llama.cpp's included) to a file, never to the terminal."""
    root = logging.getLogger()
    root.handlers.clear()
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            log_path, maxBytes=5 * 1024 * 1024, backupCount=3, encoding="utf-8"
        )
    else:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)

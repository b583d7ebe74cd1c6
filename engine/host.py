"""The engine process: owns one loaded model, runs generation, reports events and memory.

Started by EngineClient with multiprocessing (spawn). A reader thread takes requests off
the pipe so a Cancel reaches the generation loop between two steps (a load's, its next
progress report: load_watch.py); everything else is handled in order on the main thread.
One loop serves both backends (GGUF and PyTorch): each runs several replies at once, requests
are taken between its steps, a new reply joins the running ones while a slot is free, and a
load or unload waits until the replies before it have ended.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from queue import Empty, Queue

from engine.backend import Backend, BackendError, EmbedJob
from engine.load_watch import LoadWatch
from engine.openmp_policy import choose_openmp_wait_policy
from engine.process_log import open_process_log
from engine.protocol import (
    CancelRequest,
    CountTokensRequest,
    EmbedRequest,
    Error,
    Event,
    GenerateRequest,
    Loaded,
    LoadRequest,
    MemoryReport,
    Request,
    ShutdownRequest,
    Token,
    TokenCount,
    Unloaded,
    UnloadRequest,
)
from engine.status_file import StatusFile

log = logging.getLogger("engine.host")

# While a reply streams, memory is reported this often (a little more than twice a second).
MEMORY_REPORT_INTERVAL_S = 0.4
# While idle with a model loaded, memory is looked at this often and reported when it changed
# (the prefix cache's disk tier is written in the background; other programs come and go).
IDLE_CHECK_S = 1.0
# After the last reply ended, the backend's idle work (the next turn's warm-up) waits this long for a
# request first: a program's next call comes within milliseconds of the reply's end (an API client's, a
# tool round's) and starts at once, instead of behind 50 ms of warm-up (or seconds, for a reasoning
# answer); a person's next message comes seconds later, and finds the turn warm. Long enough that the
# warm-up of one engine does not land on the cores while a program's burst of requests to another runs.
AFTER_REPLY_GRACE_S = 1.0
# Free memory and the rest of the process move a little all the time; smaller moves are no change.
MEMORY_NOISE_BYTES = 16 << 20
# Streamed text is sent in pieces at most this often: no eye sees faster updates, and on
# a machine with few cores every wake-up of the client steals time from llama.cpp's threads.
TOKEN_FLUSH_INTERVAL_S = 0.025


def run_engine(requests: Connection, events: Connection, log_path: str | None) -> None:
    """Entry point of the engine child process."""
    # A terminal's Ctrl+C goes to the whole process group: the engine outlives it, so the front end
    # can stop the reply and shut the engine down in order (`tailor chat` exits 130). Set here, in the
    # child, not around the spawn in the parent: a parent whose SIGINT handler Qt installed in C
    # (inside an event loop) could not get it back, and every later child inherited SIGINT ignored.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
        host.remove_status()
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
        self._status: StatusFile | None = None
        self._last_report: MemoryReport | None = None
        self._queue: deque[Request | None] = deque()  # taken off the inbox, not handled yet (in order)
        self._replies: dict[int, _ReplyOut] = {}  # replies running in the backend, by request id
        self._embeds: deque[tuple[int, EmbedJob]] = deque()  # embedding requests under way, oldest first
        self._last_step_report = 0.0
        self._after_reply = False  # the last reply ended: its memory report is due
        self._idle_work = False  # the backend's idle work is due (after the grace)
        self._stopping = False  # told to shut down: replies still running are cancelled
        self._loads = LoadWatch(self._send)  # the loads' progress and cancels

    def serve(self, requests: Connection) -> None:
        threading.Thread(target=self._receive, args=(requests,), name="engine-requests", daemon=True).start()
        while True:
            busy = bool(self._replies or self._embeds)
            self._take_requests(wait=False)
            if not busy and not self._queue:
                self._wait_idle()
            if not self._run_queue():
                return
            if self._replies:
                self._step()
            if self._embeds:  # one batch of the oldest, between two of the replies'
                self._embed_step()

    def _wait_idle(self) -> None:
        """Nothing runs or waits: wait for a request. After a reply: its memory report, then a request that
        comes within the grace starts first; then the backend's idle work (next_turn.py), which gives way to
        a request that arrives meanwhile (between two of its chunks)."""
        if self._after_reply:  # sent once nothing waits: a request already there started first
            self._after_reply, self._idle_work = False, True
            if self._backend is not None:
                self._send_memory(self._backend.memory())
        if self._idle_work:
            if self._take_requests(wait=True, timeout=AFTER_REPLY_GRACE_S):
                return
            self._idle_work = False
            self._idle()
            if not self._inbox.empty():  # cut short: the rest waits for the next idle moment
                self._idle_work = True
                return
        if not self._take_requests(wait=True, timeout=IDLE_CHECK_S):
            self._report_if_changed()

    def _idle(self) -> None:
        """The backend's idle work until a request arrives; a failure is only logged: it warms no more."""
        if self._backend is None:
            return
        try:
            if self._backend.idle(lambda: not self._inbox.empty()):
                self._send_memory(self._backend.memory())
        except Exception:  # noqa: BLE001 - idle work must never take the engine down
            log.exception("idle work failed")

    def _take_requests(self, wait: bool = False, timeout: float = IDLE_CHECK_S) -> bool:
        """Move what arrived from the inbox to the queue; `wait`: block up to `timeout` for the first.
        Whether anything came."""
        if wait:
            try:
                self._queue.append(self._inbox.get(timeout=timeout))
            except Empty:
                return False
        while True:
            try:
                self._queue.append(self._inbox.get_nowait())
            except Empty:
                return bool(self._queue)

    def _run_queue(self) -> bool:
        """Handle queued requests in order while they can run now; False once told to shut down."""
        while self._queue:
            request = self._queue[0]
            if isinstance(request, CountTokensRequest):  # renders and tokenizes only: no need to wait for replies
                self._queue.popleft()
                self._guarded(request, lambda r=request: self._count(r))
                continue
            if isinstance(request, EmbedRequest):  # runs beside the replies: no need to wait for them
                self._queue.popleft()
                if not self._guarded(request, lambda r=request: self._start_embed(r)):
                    self._forget_cancel(request.request_id)
                continue
            backend = self._backend if isinstance(request, GenerateRequest) else None
            if backend is not None and backend.free_slots > 0:
                self._queue.popleft()
                self._start(backend, request)  # type: ignore[arg-type]
                continue
            if self._replies or self._embeds:  # a full batch, or a load, unload or shutdown behind running work: wait
                if request is None or isinstance(request, ShutdownRequest):
                    self._stopping = True  # the running replies end at the next step (cancelled)
                return True
            self._queue.popleft()
            if request is None or isinstance(request, ShutdownRequest):
                return False
            self._guarded(request, lambda r=request: self._handle(r))
        return True

    def _guarded(self, request: Request, handle: Callable[[], None]) -> bool:
        """Run `handle`; a failure becomes the request's Error event (the engine keeps serving). Whether it ran."""
        try:
            handle()
            return True
        except BackendError as exc:
            self._send(Error(exc.kind, str(exc), getattr(request, "request_id", None)))  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            log.exception("request %r failed", request)
            self._send(Error("internal", f"{type(exc).__name__}: {exc}", getattr(request, "request_id", None)))
        return False

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
            elif not self._loads.heard(request):  # a load is counted; a cancel of loads is done with here
                self._inbox.put(request)

    def _handle(self, request: Request) -> None:
        if isinstance(request, LoadRequest):
            self._load(request)
        elif isinstance(request, GenerateRequest):  # no model: a loaded backend always has a slot with none running
            raise BackendError("no_model", "No model is loaded.")
        elif isinstance(request, UnloadRequest):
            self.close()
            self._send(Unloaded())
            if self._status is not None:
                self._status.set_model(None, None)
            self._send_memory(MemoryReport((), 0, 0))

    def _load(self, request: LoadRequest) -> None:
        self._loads.begin()
        self.close()
        t0 = time.perf_counter()
        backend = self._new_backend(request.path)
        info = backend.load(request)
        self._loads.check(request.path, backend.close)  # a cancel after the last report (the context, pins)
        self._backend = backend
        self._send(Loaded(info, time.perf_counter() - t0))
        if request.status_dir and (self._status is None or self._status.path.parent != Path(request.status_dir)):
            self.remove_status()
            self._status = StatusFile(Path(request.status_dir))
        if self._status is not None:
            self._status.set_model(request, info)
        self._send_memory(backend.memory())

    def _count(self, request: CountTokensRequest) -> None:
        if self._backend is None:
            raise BackendError("no_model", "No model is loaded.")
        self._send(TokenCount(request.request_id, self._backend.count_tokens(request)))

    def _start(self, backend: Backend, request: GenerateRequest) -> None:
        """Start a reply in the backend, beside those running."""
        rid = request.request_id
        out = _ReplyOut(rid, self._send)
        if self._guarded(request, lambda: backend.submit(request, out.emit, lambda: self._is_cancelled(rid))):
            self._replies[rid] = out
        else:  # refused: its Error is sent
            self._forget_cancel(rid)

    def _start_embed(self, request: EmbedRequest) -> None:
        if self._backend is None:
            raise BackendError("no_model", "No model is loaded.")
        self._embeds.append((request.request_id, self._backend.embed(request)))

    def _embed_step(self) -> None:
        """One batch of the oldest embedding request; its Embeddings (or Error) once it ends."""
        rid, job = self._embeds[0]
        if self._is_cancelled(rid):
            self._end_embed(Error("cancelled", "The embedding request was cancelled.", rid))
            return
        try:
            answer = job.step()
        except BackendError as exc:
            self._end_embed(Error(exc.kind, str(exc), rid))  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            log.exception("embedding request %d failed", rid)
            self._end_embed(Error("internal", f"{type(exc).__name__}: {exc}", rid))
        else:
            if answer is not None:
                self._end_embed(answer)

    def _end_embed(self, answer: Event) -> None:
        rid, _ = self._embeds.popleft()
        self._forget_cancel(rid)
        self._send(answer)
        self._report_if_changed()  # a chat model's first request made a context for embeddings

    def _step(self) -> None:
        """One batch of the running replies; each that ended gets its last text and its Done or Error."""
        backend = self._backend
        assert backend is not None  # replies run only in a loaded backend
        for rid, outcome in backend.step():
            out = self._replies.pop(rid)
            out.flush()
            self._forget_cancel(rid)
            if isinstance(outcome, BackendError):
                self._send(Error(outcome.kind, str(outcome), rid))  # type: ignore[arg-type]
            else:
                self._send(outcome)
        if not self._replies:  # reported once nothing waits: a request already there starts first
            self._after_reply = True
            return
        now = time.monotonic()
        if now - self._last_step_report >= MEMORY_REPORT_INTERVAL_S:
            self._last_step_report = now
            self._send_memory(backend.memory())

    def _is_cancelled(self, rid: int) -> bool:
        if self._client_gone.is_set() or self._stopping:
            return True
        with self._cancel_lock:
            return rid in self._cancelled

    def _forget_cancel(self, rid: int) -> None:
        with self._cancel_lock:
            self._cancelled.discard(rid)

    # ------------------------------------------------------------ memory reports

    def _send_memory(self, report: MemoryReport) -> None:
        self._last_report = report
        if self._status is not None:  # first, so whoever gets the event finds the file up to date
            self._status.write(report)
        self._send(report)

    def _report_if_changed(self) -> None:
        if self._backend is None:
            return
        try:
            report = self._backend.memory()
        except Exception:  # noqa: BLE001 - a failed look at memory must not stop the engine
            log.exception("memory report failed")
            return
        if _changed(self._last_report, report):
            self._send_memory(report)

    def remove_status(self) -> None:
        """Remove this engine's status file (at exit, or when a load names another folder)."""
        if self._status is not None:
            self._status.remove()
            self._status = None

    def _new_backend(self, path: str) -> Backend:
        """A backend for the model at `path`: a Hugging Face folder (config.json) runs on PyTorch, else GGUF."""
        folder = Path(path).expanduser()
        # models.plan.folder_plan.is_model_folder's test, inline: importing that module (the hub client)
        # would add 0.4 s to every engine start.
        if folder.is_dir() and (folder / "config.json").is_file():
            # Before torch loads OpenMP: its threads spin between ops when the cores are idle (what makes a
            # decode step fast), and sleep when other programs are busy, or every small op of a decode step
            # waits for a descheduled spinner (20x slower measured). engine/openmp_policy.py says why.
            choose_openmp_wait_policy()
            try:  # torch is an optional extra, imported only inside the engine process
                from engine.torch.backend import TorchBackend
            except ImportError as exc:
                raise BackendError(
                    "invalid_model",
                    f"{folder.name} is a PyTorch (safetensors) model, which needs the awq extra: "
                    f"pip install 'tailor[awq]' ({exc})",
                ) from None
            return TorchBackend(progress=self._loads.report)
        # Imported here: llama_cpp is loaded only inside the engine process.
        from engine.gguf.backend import GgufBackend
        from engine.gguf.log_bridge import LlamaLogBridge

        if self._log_bridge is None:  # llama.cpp has one process-wide log callback
            self._log_bridge = LlamaLogBridge()
        return GgufBackend(self._log_bridge, self._loads.report)

    def _send(self, event: Event) -> None:
        with self._send_lock:
            try:
                self._events.send(event)
            except (BrokenPipeError, OSError):
                pass  # the client went away; the reader thread will end the loop


class _ReplyOut:
    """One reply's text on its way to the client, in pieces at most every TOKEN_FLUSH_INTERVAL_S (the
    first at once: time to first token is what a warm prefix saves); reasoning and answer text go in
    Tokens of their own."""

    def __init__(self, request_id: int, send: Callable[[Event], None]):
        self._rid, self._send = request_id, send
        self._pending: list[str] = []
        self._reasoning = False  # the kind of the pending text
        self._last_flush = time.monotonic() - TOKEN_FLUSH_INTERVAL_S

    def emit(self, text: str, reasoning: bool = False) -> None:
        if reasoning != self._reasoning:
            self.flush()
            self._reasoning = reasoning
        self._pending.append(text)
        now = time.monotonic()
        if now - self._last_flush >= TOKEN_FLUSH_INTERVAL_S:
            self._last_flush = now
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._send(Token(self._rid, "".join(self._pending), self._reasoning))
            self._pending.clear()


def _changed(old: MemoryReport | None, new: MemoryReport) -> bool:
    """Whether a report says something new: any part or token count, or a move beyond the noise."""
    if old is None or len(old.devices) != len(new.devices) or old.kv_tokens_used != new.kv_tokens_used:
        return True
    if (old.prefix_cache_disk_bytes, old.kv_shared_tokens, old.kv_cached_tokens) != (
        new.prefix_cache_disk_bytes, new.kv_shared_tokens, new.kv_cached_tokens
    ):
        return True
    for a, b in zip(old.devices, new.devices, strict=True):
        exact = ("device", "weights_bytes", "kv_allocated_bytes", "compute_bytes", "prefix_cache_bytes", "total_bytes")
        if any(getattr(a, f) != getattr(b, f) for f in exact):
            return True
        if abs(a.free_bytes - b.free_bytes) >= MEMORY_NOISE_BYTES or abs(a.other_bytes - b.other_bytes) >= MEMORY_NOISE_BYTES:
            return True
    return False


def _configure_logging(log_path: str | None) -> None:
    """Send the engine's logs (llama.cpp's included) to its own file, never to the terminal.

    A native crash inside llama.cpp or torch kills the process without a Python exception;
    faulthandler then writes every thread's Python stack into the same file.
    """
    root = logging.getLogger()
    root.handlers.clear()
    handler: logging.Handler = (
        open_process_log(Path(log_path), crash_traces=True) if log_path else logging.NullHandler()
    )
    root.addHandler(handler)
    root.setLevel(logging.INFO)

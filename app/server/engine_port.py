"""EnginePort: the engine as the server's request handlers see it (asyncio side).

One EngineClient may be shared with the window: each reply the server starts is routed to
its own asyncio queue by request id, so neither side ever sees the other's tokens. The
server runs up to `parallel` replies at once (the engine batches them); the others wait in
arrival order (asyncio.Semaphore wakes waiters first come, first served) for at most the
queue timeout, then get a 503. A request whose client left while it waited never reaches
the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.server.config import DEFAULT_QUEUE_TIMEOUT_S
from engine.interface import Embedder, Engine, EngineNotRunning, TokenCounter
from engine.protocol import (
    DEFAULT_PARALLEL,
    ChatMessage,
    Done,
    Embeddings,
    Error,
    Event,
    ModelInfo,
    ReplyShape,
    SamplingParams,
    TokenCount,
)

log = logging.getLogger(__name__)

# How many finished replies the port remembers (for logs and tests).
HISTORY = 64


@dataclass(slots=True, frozen=True)
class Outcome:
    """How one of the server's replies ended in the engine."""

    request_id: int
    finish_reason: str  # "stop", "length", "cancelled" or "error:<kind>"
    gen_tokens: int


def model_id(info: ModelInfo) -> str:
    """The name clients use for the loaded model: its file name without `.gguf`."""
    name = Path(info.path).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


class EnginePort:
    """Runs the server's replies on an engine, `parallel` at a time.

    Args:
        client: the EngineClient (shared or the server's own).
        model_info: the model loaded now, or None while there is none.
        parallel: replies at once; more wait their turn.
        queue_timeout_s: how long a request waits for its turn before a "busy" Error (a 503).
    """

    def __init__(self, client: Engine, model_info: Callable[[], ModelInfo | None], parallel: int = DEFAULT_PARALLEL,
                 queue_timeout_s: float = DEFAULT_QUEUE_TIMEOUT_S):
        self._client = client
        self._model_info = model_info
        self.parallel = parallel
        self._queue_timeout_s = queue_timeout_s
        self._turns = asyncio.Semaphore(parallel)
        self._waiting = 0
        self.active: list[int] = []  # request ids of the replies running now, oldest first
        self.outcomes: deque[Outcome] = deque(maxlen=HISTORY)
        self._ended = threading.Condition()

    @property
    def model(self) -> ModelInfo | None:
        return self._model_info()

    @property
    def waiting(self) -> int:
        """Requests queued behind the one running."""
        return self._waiting

    def model_ids(self) -> tuple[str, ...]:
        """Names the loaded model answers to: its id first, then its display name."""
        info = self.model
        if info is None:
            return ()
        return tuple(dict.fromkeys((model_id(info), info.name)))

    async def generate(
        self, messages: Sequence[ChatMessage], sampling: SamplingParams, prompt: str | None = None,
        shape: ReplyShape | None = None, api: str = "",
    ) -> AsyncIterator[Event]:
        """The reply's events, ending with its Done or Error.

        Closing the iterator early (the HTTP client went away) cancels the reply in the engine. How it
        ended goes to the log with its model, its `api` (the route that asked: "chat.completions"...),
        its tokens and its time: one line per reply, whatever API it came through.
        """
        asked = time.monotonic()
        busy = await self._take_turn()
        if busy is not None:
            yield busy
            return
        try:
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[Event] = asyncio.Queue()

            def on_event(event: Event) -> None:  # on the engine client's reader thread
                if isinstance(event, Done | Error):
                    self._record(event)
                    self._log(event, api, time.monotonic() - asked)
                with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
                    loop.call_soon_threadsafe(queue.put_nowait, event)

            try:
                request_id = self._client.generate(messages, sampling, prompt=prompt, on_event=on_event, shape=shape)
            except EngineNotRunning as exc:
                yield Error("engine_died", f"The engine is not running ({exc}).")
                return
            self.active.append(request_id)
            finished = False
            try:
                while not finished:
                    event = await queue.get()
                    finished = isinstance(event, Done | Error)
                    yield event
            finally:
                self.active.remove(request_id)
                if not finished:
                    with contextlib.suppress(EngineNotRunning):
                        self._client.cancel(request_id)
        finally:
            self._turns.release()

    async def count_tokens(self, messages: Sequence[ChatMessage], shape: ReplyShape | None = None) -> int | Error:
        """The tokens of the prompt `messages` make (rendered for `shape`), as a reply's stats.prompt_tokens
        counts them, or the engine's Error (a template that refuses them, say). It waits for no reply slot."""
        client = self._client
        if not isinstance(client, TokenCounter):
            return Error("bad_request", "The engine behind this server cannot count tokens.")
        answer, on_event = _one_answer()
        try:
            client.count_tokens(messages, shape, on_event=on_event)
        except EngineNotRunning as exc:
            return Error("engine_died", f"The engine is not running ({exc}).")
        event = await answer
        if isinstance(event, TokenCount | Error):
            return event.tokens if isinstance(event, TokenCount) else event
        return Error("internal", f"The engine answered a count with {type(event).__name__}.")

    async def embed(self, inputs: Sequence[str | Sequence[int]], normalize: bool = True,
                    truncate: bool = False) -> Embeddings | Error:
        """One vector per input (EmbedRequest), or the Error that says why not; queued like a reply, it takes one
        of the `parallel` turns. Cancelled in the engine when the awaiting task is (the HTTP client left)."""
        if not isinstance(self._client, Embedder):
            return Error("bad_request", "This engine makes no embeddings (a remote server's model).")
        busy = await self._take_turn()
        if busy is not None:
            return busy
        try:
            answer, on_event = _one_answer()
            try:
                request_id = self._client.embed(inputs, normalize, truncate=truncate, on_event=on_event)
            except EngineNotRunning as exc:
                return Error("engine_died", f"The engine is not running ({exc}).")
            self.active.append(request_id)
            try:
                event = await answer
            finally:
                self.active.remove(request_id)
                if not answer.done():
                    with contextlib.suppress(EngineNotRunning):
                        self._client.cancel(request_id)
            return event if isinstance(event, Embeddings | Error) else Error("internal", f"Unexpected {event!r}")
        finally:
            self._turns.release()

    async def _take_turn(self) -> Error | None:
        """One of the `parallel` turns taken (given back by the caller), or the busy Error once the queue
        timeout passed."""
        self._waiting += 1
        try:
            async with asyncio.timeout(self._queue_timeout_s):
                await self._turns.acquire()
        except TimeoutError:
            return Error("busy", f"The server is busy: {len(self.active)} requests are running and "
                                 f"{self._waiting - 1} more are waiting. Try again shortly.")
        finally:
            self._waiting -= 1
        return None

    def wait_outcome(self, request_id: int, timeout: float) -> Outcome | None:
        """The outcome of a reply once the engine ended it (for callers off the event loop)."""
        with self._ended:
            self._ended.wait_for(lambda: self.outcome(request_id) is not None, timeout)
            return self.outcome(request_id)

    def outcome(self, request_id: int) -> Outcome | None:
        return next((o for o in self.outcomes if o.request_id == request_id), None)

    def _log(self, event: Done | Error, api: str, seconds: float) -> None:
        info = self.model
        name = model_id(info) if info is not None else "?"
        via = f" ({api})" if api else ""
        if isinstance(event, Done):
            s = event.stats
            log.info("reply %d of %s%s: %s, %s prompt tokens (%s cached) + %d generated in %.2f s, TTFT %.3f s",
                     event.request_id, name, via, event.finish_reason, s.prompt_tokens, s.cached_tokens,
                     s.gen_tokens, seconds, s.ttft_s)
        else:
            log.info("reply %s of %s%s failed after %.2f s: %s: %s", event.request_id, name, via, seconds,
                     event.kind, event.message)

    def _record(self, event: Done | Error) -> None:
        if isinstance(event, Done):
            outcome = Outcome(event.request_id, event.finish_reason, event.stats.gen_tokens)
        else:
            outcome = Outcome(event.request_id or 0, f"error:{event.kind}", 0)
        with self._ended:
            self.outcomes.append(outcome)
            self._ended.notify_all()


def _one_answer() -> tuple[asyncio.Future[Event], Callable[[Event], None]]:
    """A future on the running loop, and the engine callback (called on the client's reader thread) that
    sets it to the first event it gets."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Event] = loop.create_future()

    def on_event(event: Event) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
            loop.call_soon_threadsafe(lambda: answer.done() or answer.set_result(event))

    return answer, on_event

"""RemoteEngine: a remote endpoint behind the `engine.interface.Engine` of the local engine.

The window's chat and the CLI drive it exactly like the local engine: `load` checks the
endpoint and answers `Loaded` (or an `Error`), `generate` streams `Token`s then `Done`
(or `Error(kind="remote")`), `cancel` stops a reply. There is no process and no memory
report: memory is the remote's business.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence

import httpx

from app.remote.bounded_http import interrupt
from app.remote.chat_request import BadTools
from app.remote.openai_client import RemoteChat, RemoteEndpoint, RemoteError
from engine.event_queue import EventQueue
from engine.protocol import (
    ChatMessage,
    Error,
    Event,
    Loaded,
    LoadRequest,
    ModelInfo,
    ReplyShape,
    SamplingParams,
)

ARCHITECTURE = "remote"
# The rate a remote model is sent clips at (as `input_audio` WAV parts: media_parts.py): the Whisper family's,
# which most audio models hear; a server resamples what it takes otherwise.
REMOTE_SAMPLE_RATE = 16_000


def remote_model_info(endpoint: RemoteEndpoint) -> ModelInfo:
    """What the window shows for a remote model (no sizes: the remote does not say)."""
    return ModelInfo(
        path=endpoint.base, name=f"{endpoint.model} (remote)", architecture=ARCHITECTURE, n_ctx=0,
        n_ctx_train=0, n_params=0, size_bytes=0, has_chat_template=True,
        vision=True,  # taken to see: a server whose model cannot answers the images with its own error
        audio=True, audio_sample_rate=REMOTE_SAMPLE_RATE,  # and to hear, likewise
    )


class RemoteEngine:
    """EngineClient's interface over an OpenAI-compatible endpoint.

    Args:
        endpoint: the server, model and key.
        on_event: called with every event (on a worker thread); None queues them for
            `next_event` / `stream`, as EngineClient does.
        transport: an httpx transport to use instead of the network (none in Tailor itself).
    """

    def __init__(self, endpoint: RemoteEndpoint, on_event: Callable[[Event], None] | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.endpoint = endpoint
        self._queue = EventQueue()
        self._on_event = on_event or self._queue.put
        self._transport = transport
        self._chat: RemoteChat | None = None
        self._ids = itertools.count(1)
        self._cancelled: set[int] = set()
        self._responses: dict[int, httpx.Response] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ lifecycle (EngineClient's)

    @property
    def running(self) -> bool:
        return self._chat is not None

    @property
    def pid(self) -> int | None:
        return None

    def start(self) -> None:
        if self._chat is None:
            self._chat = RemoteChat(self.endpoint, self._transport)

    def restart(self) -> None:
        self.shutdown()
        self.start()

    def shutdown(self, timeout: float = 5.0) -> None:
        chat, self._chat = self._chat, None
        with self._lock:
            self._cancelled.update(self._responses)
            responses = list(self._responses.values())
        for response in responses:
            interrupt(response)
        if chat is not None:
            chat.close()

    # ------------------------------------------------------------ requests

    def load(self, request: LoadRequest | None = None) -> None:
        """Check the endpoint lists the model; answered by `Loaded` or `Error(kind="invalid_model")`."""
        self.start()
        threading.Thread(target=self._check, name="remote-load", daemon=True).start()

    def generate(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams,
        *,
        prompt: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        shape: ReplyShape | None = None,
    ) -> int:
        """Start a reply; its request id. Raw prompts are not sent to remotes (chat only).

        The shape's tools go to the server (the remote model sees them; Tailor runs the calls): the
        Done of a reply that calls some has them in `tool_calls`, its finish reason "tool_calls"."""
        self.start()
        request_id = next(self._ids)
        deliver = on_event or self._on_event
        threading.Thread(
            target=self._run, args=(request_id, tuple(messages), sampling, deliver, shape),
            name="remote-reply",
            daemon=True,
        ).start()
        return request_id

    def cancel(self, request_id: int) -> None:
        with self._lock:
            self._cancelled.add(request_id)
            response = self._responses.get(request_id)
        if response is not None:
            interrupt(response)  # wakes a read that waits on a silent server

    def unload(self) -> None:
        pass

    # ------------------------------------------------------------ queued events (no callback)

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next queued event, or None after `timeout` seconds."""
        return self._queue.next_event(timeout)

    def stream(self, request_id: int) -> Iterator[Event]:
        """Yield queued events of one reply (and engine-wide errors) until it ends."""
        return self._queue.stream(request_id)

    # ------------------------------------------------------------ workers

    def _check(self) -> None:
        chat = self._chat
        if chat is None:
            return
        try:
            models = chat.models()
        except RemoteError as exc:
            self._on_event(Error("invalid_model", str(exc)))
            return
        if models and self.endpoint.model not in models:
            listed = ", ".join(models[:8])
            self._on_event(Error(
                "invalid_model", f"{self.endpoint.base} has no model '{self.endpoint.model}'; it lists: {listed}."
            ))
            return
        self._on_event(Loaded(remote_model_info(self.endpoint), 0.0))

    def _run(self, request_id: int, messages: tuple[ChatMessage, ...], sampling: SamplingParams,
             deliver: Callable[[Event], None], shape: ReplyShape | None) -> None:
        chat = self._chat
        if chat is None:
            deliver(Error("remote", "The remote endpoint was closed.", request_id))
            return

        def cancelled() -> bool:
            return request_id in self._cancelled

        def opened(response: httpx.Response) -> None:
            with self._lock:
                self._responses[request_id] = response
            if cancelled():
                response.close()

        try:
            for event in chat.stream(request_id, messages, sampling, cancelled, opened, _effort(shape), shape):
                deliver(event)
        except BadTools as exc:
            deliver(Error("bad_request", str(exc), request_id))
        except Exception as exc:  # a reply must end, whatever a server's answer breaks: else the window waits forever
            deliver(Error("remote", f"The reply from {self.endpoint.base} failed: {type(exc).__name__}: {exc}",
                          request_id))
        finally:
            with self._lock:
                self._responses.pop(request_id, None)
                self._cancelled.discard(request_id)


def _effort(shape: ReplyShape | None) -> str | None:
    """OpenAI's reasoning_effort for the chat's Reasoning setting; None leaves the server's default (a
    thinking budget is the local engine's: a remote server has no such field)."""
    reasoning = shape.reasoning if shape is not None else "auto"
    return {"off": "none", "low": "low", "medium": "medium", "high": "high"}.get(reasoning)

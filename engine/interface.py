"""Engine: what every engine Tailor drives offers, the local process (EngineClient) and a remote
server (app/remote/RemoteEngine) alike.

An engine calls back with events (`engine.protocol.Event`) on a thread of its own: the events of
a reply started with `on_event` go there, every other event (Loaded, MemoryReport, an engine that
died) to the handler the engine was made with. Several users may share one engine (the window's
chat and its server): each routes its replies by request id and never sees the other's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from engine.protocol import ChatMessage, Event, LoadRequest, ReplyShape, SamplingParams


class EngineNotRunning(RuntimeError):
    """A request was made while no engine is running."""


@runtime_checkable
class Engine(Protocol):
    """Start, load, generate, cancel, shut down; see the module's docstring for the events."""

    @property
    def running(self) -> bool: ...

    @property
    def pid(self) -> int | None:
        """The engine's process id; None when it has none (a remote server) or is not running."""
        ...

    def start(self) -> None: ...

    def restart(self) -> None:
        """Start afresh after the engine died or hung."""
        ...

    def load(self, request: LoadRequest) -> None:
        """Load a model; answered by `Loaded` or an `Error`."""
        ...

    def generate(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams,
        *,
        prompt: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        shape: ReplyShape | None = None,
    ) -> int:
        """Start a reply; its request id. Answered by `Token`s, then `Done` or an `Error`.

        Raises:
            EngineNotRunning: the engine is gone (its `engine_died` error is on the way).
        """
        ...

    def cancel(self, request_id: int) -> None:
        """Stop a reply early; its `Done` comes with finish_reason "cancelled"."""
        ...

    def shutdown(self, timeout: float = 5.0) -> None: ...


@runtime_checkable
class TokenCounter(Protocol):
    """An engine that counts a prompt's tokens without a reply (the local engine; a remote server cannot)."""

    def count_tokens(self, messages: Sequence[ChatMessage], shape: ReplyShape | None = None, *,
                     on_event: Callable[[Event], None] | None = None) -> int:
        """Ask for the count; its request id. Answered by `TokenCount` or an `Error` (to `on_event`)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """An engine that embeds (the local engine; a remote chat server is not asked to)."""

    def embed(self, inputs: Sequence[str | Sequence[int]], normalize: bool = True, *, truncate: bool = False,
              on_event: Callable[[Event], None] | None = None) -> int:
        """Ask for one vector per input; its request id. Answered by `Embeddings` or an `Error` (to `on_event`)."""
        ...

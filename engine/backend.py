"""What the engine host needs of a backend (GGUF now, torch later)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from engine.protocol import Done, GenerateRequest, LoadRequest, MemoryReport, ModelInfo


class BackendError(Exception):
    """A failure the user can act on; `kind` is one of protocol.ErrorKind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Backend(Protocol):
    def load(self, request: LoadRequest) -> ModelInfo:
        """Load the model or raise BackendError("invalid_model", ...)."""
        ...

    def generate(
        self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]
    ) -> Done:
        """Stream text pieces through `emit`; stop early when `cancelled()` turns true."""
        ...

    def memory(self) -> MemoryReport: ...

    def close(self) -> None: ...


@runtime_checkable
class BatchingBackend(Backend, Protocol):
    """A backend that runs several replies at once, one batch per `step()` (the GGUF one)."""

    @property
    def free_slots(self) -> int:
        """How many more replies can start now."""
        ...

    def submit(self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]) -> None:
        """Start a reply (BackendError when it cannot run); its text comes through `emit` during steps."""
        ...

    def step(self) -> list[tuple[int, Done | BackendError]]:
        """One batch of every running reply; (request id, Done or BackendError) of those that ended."""
        ...

    def idle(self) -> int:
        """Work worth doing while nothing runs or waits (a finished chat's next turn, prefilled); how much
        was done (0: nothing to do). Called between requests: it must be short."""
        ...

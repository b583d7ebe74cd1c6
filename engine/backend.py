"""What the engine host needs of a backend (GGUF and PyTorch alike): replies run batched, stepped by the host."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from engine.protocol import (
    CountTokensRequest,
    Done,
    Embeddings,
    EmbedRequest,
    GenerateRequest,
    LoadRequest,
    MemoryReport,
    ModelInfo,
)


class BackendError(Exception):
    """A failure the user can act on; `kind` is one of protocol.ErrorKind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class EmbedJob(Protocol):
    """An EmbedRequest under way: the host steps it between the replies' batches."""

    def step(self) -> Embeddings | None:
        """Embed the next batch of inputs; the answer once the last is done (BackendError where one fails)."""
        ...


class Backend(Protocol):
    """A loaded model that runs several replies at once, one batch per `step()`; the host's one loop
    submits replies while slots are free and steps while any runs."""

    def load(self, request: LoadRequest) -> ModelInfo:
        """Load the model or raise BackendError("invalid_model", ...)."""
        ...

    def memory(self) -> MemoryReport: ...

    def close(self) -> None: ...

    @property
    def free_slots(self) -> int:
        """How many more replies can start now (0 with no model loaded)."""
        ...

    def submit(self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]) -> None:
        """Start a reply (BackendError when it cannot run); its text comes through `emit` during steps,
        and it ends at the first step after `cancelled()` turns true."""
        ...

    def count_tokens(self, request: CountTokensRequest) -> int:
        """The tokens of the request's prompt, rendered and tokenized as `submit` would (BackendError as it
        would refuse it), without decoding anything."""
        ...

    def step(self) -> list[tuple[int, Done | BackendError]]:
        """One batch of every running reply; (request id, Done or BackendError) of those that ended."""
        ...

    def embed(self, request: EmbedRequest) -> EmbedJob:
        """Start embedding the request's inputs (BackendError for an input it cannot take, or a model that
        cannot embed); the host steps the job to its end."""
        ...

    def idle(self, interrupted: Callable[[], bool] = lambda: False) -> int:
        """Work worth doing while nothing runs or waits (a finished chat's next turn, prefilled); how much
        was done (0: nothing to do). Called between requests: it stops soon after `interrupted()` turns
        true (a request waits), leaving the rest for the next call."""
        ...


def run_alone(backend: Backend, request: GenerateRequest, emit: Callable[[str], None],
              cancelled: Callable[[], bool]) -> Done:
    """One reply from start to end, stepping the backend until it ends (replies beside it run too, their
    ends unseen): for tests and benches that want a single answer without the host."""
    backend.submit(request, emit, cancelled)
    while True:
        for request_id, outcome in backend.step():
            if request_id == request.request_id:
                if isinstance(outcome, BackendError):
                    raise outcome
                return outcome

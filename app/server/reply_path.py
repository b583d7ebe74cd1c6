"""The path every API's reply takes, whatever its shapes: the model lent, the first event, stream or whole.

OpenAI's chat and completions, the Responses API, Anthropic's Messages and Ollama's chat and generate differ
in how a body is read and how a reply is written, and in nothing else. Each handler reads its body, then

    params, lease = await lend(router, name, parse)          # fields checked, the model loaded and lent
    events = lease.generate(...)
    return await answer(request, lease, events, stream=..., streamed=..., whole=..., refuse=...)

`lend` checks the fields against the model the name would reach where that is known without loading
anything (a 400 names a field before a 404 names the model, and nothing loads for a bad request), and
again against the model lent when it turned out to be another. `answer` waits for the reply's first event,
which says whether it starts at all (an engine refusal is an error response, not a stream that fails),
then hands it to the API's stream or collects the whole reply; a client that leaves first gets nothing
(499) and its reply is cancelled in the engine. The lease goes back when the reply ends, however it ends:
a stream's response returns it as it closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from app.server.errors import ApiError, from_engine
from app.server.model_router import Lease, ModelRouter
from app.server.streaming import ClientGone, unless_disconnected
from engine.protocol import Error, Event, ModelInfo

P = TypeVar("P")
Events = AsyncIterator[Event]


async def lend(router: ModelRouter, name: str | None, parse: Callable[[ModelInfo], Awaitable[P]],
               keep_alive: float | None = None) -> tuple[P, Lease]:
    """The request parsed for the model `name` reaches, and that model lent (ApiError where either fails:
    the lease is returned before it is raised)."""
    stand_in = router.stand_in(name)
    params = await parse(stand_in) if stand_in is not None else None
    lease = await router.acquire(name, keep_alive)
    try:
        if params is None or lease.info != stand_in:
            params = await parse(lease.info)
    except BaseException:
        lease.release()
        raise
    return params, lease


async def answer(request: Request, lease: Lease, events: Events, *, stream: bool,
                 streamed: Callable[[Event, Events], Response], whole: Callable[[Event, Events], Awaitable[Response]],
                 refuse: Callable[[ApiError], Response]) -> Response:
    """The response to one reply's `events` (see the module docstring).

    Args:
        request: the HTTP request (watched for the client leaving).
        lease: the model the reply runs on; returned here unless a stream's response takes it over.
        events: the reply's engine events (`lease.generate`).
        stream: the client asked for a stream.
        streamed: the streaming response from the first event and the rest; it must return the lease
            as it closes (`on_close=lease.release`).
        whole: the whole reply's response from the first event and the rest.
        refuse: the API's error response for an ApiError.
    """
    streaming = False
    try:
        try:
            first = await unless_disconnected(anext(events), request.receive)
        except ClientGone:
            await events.aclose()  # type: ignore[attr-defined]
            return Response(status_code=499)
        if isinstance(first, Error):
            await events.aclose()  # type: ignore[attr-defined]
            return refuse(from_engine(first))
        if stream:
            response = streamed(first, events)
            streaming = True
            return response
        try:
            return await unless_disconnected(whole(first, events), request.receive)
        except ClientGone:
            return Response(status_code=499)
        finally:
            await events.aclose()  # type: ignore[attr-defined]
    except ApiError as error:
        return refuse(error)
    finally:
        if not streaming:
            lease.release()

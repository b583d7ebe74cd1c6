"""The Responses API's routes: `POST /v1/responses`, and `GET`/`DELETE /v1/responses/{id}` for stored ones.

A request is checked (request.py) before it queues for the engine, against the model it would reach;
the model comes from the router like every API's (a lease, released when the reply is over). The
reply goes out whole or as events (events.py); a client that leaves cancels it. A finished response
is kept (store.py) unless the request said `store: false`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.config import ServerConfig
from app.server.errors import ApiError, from_engine
from app.server.image_parts import ImageFetch, fetch_image
from app.server.model_router import ModelRouter
from app.server.reply_path import answer, lend
from app.server.request_json import load_request_json
from app.server.responses.events import Event as StreamEvent
from app.server.responses.events import ReplyEvents, sse_event
from app.server.responses.input_items import has_input_images
from app.server.responses.output import ResponseObject
from app.server.responses.request import ResponsesRequest, parse_request
from app.server.responses.store import ResponseStore, stored
from app.server.responses.tool_list import TOOLS_LEFT_OUT
from app.server.streaming import EventStream
from engine.protocol import ChatMessage, Done, Error, Event, ModelInfo, Token


def routes(router: ModelRouter, config: ServerConfig, store: ResponseStore | None = None) -> list[Route]:
    """The Responses API's routes over `router`, keeping responses in `store` (None: a new one)."""
    api = _ResponsesApi(router, store or ResponseStore(), fetch_image if config.allow_image_urls else None)
    return [
        Route("/v1/responses", api.create, methods=["POST"]),
        Route("/v1/responses/{response_id}", api.stored, methods=["GET", "DELETE"]),
    ]

log = logging.getLogger(__name__)


def _error(error: ApiError) -> Response:
    return Response(error.body_bytes(), status_code=error.status, media_type="application/json")


class _ResponsesApi:
    def __init__(self, router: ModelRouter, store: ResponseStore, fetch: ImageFetch | None):
        self.router, self.store, self.fetch = router, store, fetch

    async def stored(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if request.method == "DELETE":
            if not self.store.delete(response_id):
                return _error(self.store.missing(response_id))
            return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})
        item = self.store.get(response_id)
        return JSONResponse(item.response) if item is not None else _error(self.store.missing(response_id))

    async def create(self, request: Request) -> Response | EventStream:
        try:
            body = load_request_json(await request.body())
            name = body.get("model") if isinstance(body, dict) else None
            params, lease = await lend(self.router, name if isinstance(name, str) else None,
                                       lambda info: self._parse(body, info))
        except ApiError as error:
            return _error(error)
        reply = ReplyEvents(ResponseObject(lease.id, params.echo, params.encrypted_reasoning, params.tools))
        left_out = params.tools.left_out
        headers = {TOOLS_LEFT_OUT: ", ".join(left_out)} if left_out else None
        if left_out:
            log.info("response of %s: hosted tools left out (this server runs none): %s", lease.id, ", ".join(left_out))
        events = lease.generate(params.messages, params.sampling, None, params.shape, api="responses")

        async def whole(first: Event, events: AsyncIterator[Event]) -> Response:
            result = await self._collect(params, reply, first, events)
            return _error(result) if isinstance(result, ApiError) else JSONResponse(result, headers=headers)

        return await answer(request, lease, events, stream=params.stream, whole=whole, refuse=_error,
                            streamed=lambda first, events: EventStream(self._stream(params, reply, first, events),
                                                                       on_close=lease.release, headers=headers))

    async def _parse(self, body: Any, info: ModelInfo) -> ResponsesRequest:
        if has_input_images(body):  # decoding images takes a while: not on the event loop
            return await asyncio.to_thread(parse_request, body, info, self._history, self.fetch)
        return parse_request(body, info, self._history, self.fetch)

    def _history(self, response_id: str) -> tuple[ChatMessage, ...]:
        return self.store.find(response_id, "previous_response_id").conversation

    def _step(self, params: ResponsesRequest, reply: ReplyEvents, event: Event) -> list[StreamEvent]:
        """The stream events of one engine event; the response is kept once it is done."""
        if isinstance(event, Token):
            return reply.token(event)
        if isinstance(event, Done):
            events = reply.done(event)
            if params.store and reply.final is not None:
                answer = ChatMessage("assistant", event.text, event.tool_calls)
                self.store.put(stored(reply.final, (*params.conversation, answer)))
            return events
        if isinstance(event, Error):  # the reply started, so the status is sent already
            return reply.fail(from_engine(event))
        return []

    async def _collect(self, params: ResponsesRequest, reply: ReplyEvents, first: Event,
                       events: AsyncIterator[Event]) -> dict[str, Any] | ApiError:
        event = first
        while True:
            if isinstance(event, Error):
                return from_engine(event)
            self._step(params, reply, event)
            if isinstance(event, Done):
                assert reply.final is not None
                return reply.final
            event = await anext(events)

    async def _stream(self, params: ResponsesRequest, reply: ReplyEvents, first: Event,
                      events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        try:
            yield b"".join(sse_event(e) for e in reply.start())
            event: Event | None = first
            while event is not None:
                chunk = b"".join(sse_event(e) for e in self._step(params, reply, event))
                if chunk:
                    yield chunk
                if isinstance(event, Done | Error):
                    break
                event = await anext(events, None)
        finally:  # closed early (the client left): the engine's reply is cancelled at once
            await events.aclose()  # type: ignore[attr-defined]


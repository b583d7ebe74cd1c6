"""POST /v1/messages and /v1/messages/count_tokens, through the model router like every API of the server.

A request's fields are checked before it queues (a 400 names the field, against the model it would reach
where that is known without loading anything, so a 404 says the rest passed); the reply is Anthropic's
message object, or its streamed events; a client that leaves cancels its reply. Anthropic's clients send
their key as `x-api-key` (guard.py takes it) and an `anthropic-version` header, which changes nothing here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.anthropic.content import has_images
from app.server.anthropic.errors import error_response
from app.server.anthropic.events import MessageEvents
from app.server.anthropic.message import message_id, whole_message
from app.server.anthropic.request import MessagesRequest, parse_request
from app.server.config import ServerConfig
from app.server.errors import ApiError, from_engine
from app.server.image_parts import ImageFetch, fetch_image
from app.server.model_router import Lease, ModelRouter
from app.server.reply_path import answer, lend
from app.server.request_json import load_request_json
from app.server.streaming import ClientGone, EventStream, unless_disconnected
from engine.protocol import Done, Error, Event, ModelInfo

log = logging.getLogger(__name__)


def routes(router: ModelRouter, config: ServerConfig) -> list[Route]:
    """Anthropic's Messages API on `router`."""
    api = _Messages(router, fetch_image if config.allow_image_urls else None)
    return [
        Route("/v1/messages", api.create, methods=["POST"]),
        Route("/v1/messages/count_tokens", api.count_tokens, methods=["POST"]),
    ]


class _Messages:
    def __init__(self, router: ModelRouter, fetch: ImageFetch | None):
        self.router = router
        self.fetch = fetch  # image URLs, where the server allows them

    async def create(self, request: Request) -> Response | EventStream:
        try:
            return await self._create(request)
        except Exception as exc:  # noqa: BLE001 - answered in Anthropic's envelope, not the server's default
            log.exception("request %s failed", request.url.path)
            return error_response(ApiError(500, f"Internal error: {type(exc).__name__}", "server_error"))

    async def count_tokens(self, request: Request) -> Response:
        try:
            return await self._count(request)
        except Exception as exc:  # noqa: BLE001 - as above
            log.exception("request %s failed", request.url.path)
            return error_response(ApiError(500, f"Internal error: {type(exc).__name__}", "server_error"))

    async def _checked(self, request: Request, count: bool) -> tuple[MessagesRequest, Lease]:
        """The request checked and the model lent to it (ApiError where either fails)."""
        body = load_request_json(await request.body())
        name = body.get("model") if isinstance(body, dict) else None
        return await lend(self.router, name if isinstance(name, str) else None,
                          lambda info: self._parse(body, info, count))

    async def _parse(self, body: Any, info: ModelInfo, count: bool) -> MessagesRequest:
        if has_images(body):  # decoding images takes a while: not on the event loop
            return await asyncio.to_thread(parse_request, body, info, self.fetch, count)
        return parse_request(body, info, self.fetch, count)

    async def _create(self, request: Request) -> Response | EventStream:
        try:
            parsed, lease = await self._checked(request, count=False)
        except ApiError as error:
            return error_response(error)
        msg_id = message_id()
        events = lease.generate(parsed.messages, parsed.sampling, None, parsed.shape, api="messages")

        async def whole(first: Event, events: AsyncIterator[Event]) -> Response:
            done = await _last(first, events)
            if isinstance(done, Error):
                return error_response(from_engine(done))
            return JSONResponse(whole_message(msg_id, lease.id, parsed, done))

        return await answer(request, lease, events, stream=parsed.stream, whole=whole, refuse=error_response,
                            streamed=lambda first, events: EventStream(
                                MessageEvents(msg_id, lease.id, parsed).stream(first, events), on_close=lease.release))

    async def _count(self, request: Request) -> Response:
        try:
            parsed, lease = await self._checked(request, count=True)
        except ApiError as error:
            return error_response(error)
        try:
            counted = await unless_disconnected(lease.port.count_tokens(parsed.messages, parsed.shape),
                                                request.receive)
        except ClientGone:
            return Response(status_code=499)
        finally:
            lease.release()
        if isinstance(counted, Error):
            return error_response(from_engine(counted))
        return JSONResponse({"input_tokens": counted})


async def _last(first: Event, events: AsyncIterator[Event]) -> Done | Error:
    event = first
    while not isinstance(event, Done | Error):
        event = await anext(events)
    return event

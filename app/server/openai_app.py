"""The OpenAI-compatible API: /v1/models, /v1/chat/completions, /v1/completions.

Requests are checked (params.py) before they queue for the engine; a streamed reply is sent
as OpenAI's chunks and ends with `data: [DONE]`; a client that leaves cancels its reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.anthropic import routes as anthropic
from app.server.config import ServerConfig
from app.server.embeddings.route import routes as embedding_routes
from app.server.errors import ApiError, from_engine
from app.server.guard import ASGIApp, Guard
from app.server.image_parts import ImageFetch, fetch_image, has_media_parts
from app.server.model_router import ModelRouter
from app.server.ollama.routes import routes as ollama_routes
from app.server.params import CompletionParams, parse_chat, parse_completion
from app.server.reply_path import answer, lend
from app.server.request_json import load_request_json
from app.server.responses.routes import routes as responses_routes
from app.server.streaming import DONE_LINE, EventStream, sse
from engine.protocol import Done, Error, Event, ModelInfo, Token, ToolCall

log = logging.getLogger(__name__)


def create_app(router: ModelRouter, config: ServerConfig) -> ASGIApp:
    """The server's ASGI app, behind its Guard (Host, Origin, key, body size): every API's routes, wired here."""
    api = _Api(router, fetch_image if config.allow_image_urls else None)
    routes = [
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/chat/completions", api.chat, methods=["POST"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
    ]
    routes += responses_routes(router, config)
    routes.extend(ollama_routes(router, config))
    routes += anthropic.routes(router, config)
    routes += embedding_routes(router, config)
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _crash})
    return Guard(app, config)


def error_response(error: ApiError) -> Response:
    # body_bytes() escapes non-ASCII: a message quoting the client's text can never fail to encode.
    headers = {"www-authenticate": "Bearer"} if error.status == 401 else None
    return Response(error.body_bytes(), status_code=error.status, headers=headers, media_type="application/json")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    text = {404: f"No route {request.url.path}.", 405: f"{request.method} is not allowed on {request.url.path}."}
    return error_response(ApiError(exc.status_code, text.get(exc.status_code, str(exc.detail)), code=None))


async def _crash(request: Request, exc: Exception) -> Response:
    log.exception("request %s failed", request.url.path)
    return error_response(ApiError(500, f"Internal error: {type(exc).__name__}", "server_error"))


class _Api:
    def __init__(self, router: ModelRouter, fetch: ImageFetch | None):
        self.router = router
        self.fetch = fetch  # image URLs, where the server allows them

    async def models(self, request: Request) -> Response:
        data = [{"id": m.id, "object": "model", "created": int(m.modified), "owned_by": "tailor",
                 "context_length": m.context, "loaded": m.loaded, "fit": m.fit, "aliases": list(m.names[1:])}
                for m in await asyncio.to_thread(self.router.listing)]  # reads headers once per file
        return JSONResponse({"object": "list", "data": data})

    async def chat(self, request: Request) -> Response:
        return await self._complete(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, chat=False)

    async def _complete(self, request: Request, chat: bool) -> Response | EventStream:
        try:
            body = load_request_json(await request.body())
            name = body.get("model") if isinstance(body, dict) else None
            params, lease = await lend(self.router, name if isinstance(name, str) else None,
                                       lambda info: self._params(body, info, chat))
        except ApiError as error:
            return error_response(error)
        reply = _Reply(params, chat, lease.id)
        events = lease.generate(params.messages, params.sampling, params.prompt, params.shape,
                                api="chat.completions" if chat else "completions")

        async def whole(first: Event, events: AsyncIterator[Event]) -> Response:
            result = await reply.collect(first, events)
            return error_response(result) if isinstance(result, ApiError) else JSONResponse(result)

        return await answer(request, lease, events, stream=params.stream, whole=whole, refuse=error_response,
                            streamed=lambda first, events: EventStream(reply.stream(first, events),
                                                                       on_close=lease.release))

    async def _params(self, body: object, info: ModelInfo, chat: bool) -> CompletionParams:
        if chat and has_media_parts(body):  # decoding images and clips takes a while: not on the event loop
            return await asyncio.to_thread(parse_chat, body, info, self.fetch)
        return parse_chat(body, info) if chat else parse_completion(body, info)


class _Reply:
    """One reply in OpenAI's shapes (chat or text completion, whole or in chunks)."""

    def __init__(self, params: CompletionParams, chat: bool, model: str):
        self.params, self.chat, self.model = params, chat, model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def _envelope(self, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model, "choices": choices}

    @staticmethod
    def _usage(done: Done) -> dict[str, Any]:
        prompt, gen = done.stats.prompt_tokens, done.stats.gen_tokens
        return {"prompt_tokens": prompt, "completion_tokens": gen, "total_tokens": prompt + gen,
                "completion_tokens_details": {"reasoning_tokens": done.stats.reasoning_tokens}}

    async def collect(self, first: Event, events: AsyncIterator[Event]) -> dict[str, Any] | ApiError:
        event = first
        while not isinstance(event, Done | Error):
            event = await anext(events)
        if isinstance(event, Error):
            return from_engine(event)
        text = (self.params.prompt or "") + event.text if self.params.echo else event.text
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text or (None if event.tool_calls else "")}
            if event.reasoning:
                message["reasoning_content"] = event.reasoning
            if event.tool_calls:
                message["tool_calls"] = [_call(c) for c in event.tool_calls]
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": event.finish_reason}
            body = self._envelope("chat.completion", [choice])
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": event.finish_reason}
            body = self._envelope("text_completion", [choice])
        body["usage"] = self._usage(event)
        return body

    def _chunk(self, text: str | None, finish: str | None, role: bool = False,
               more: dict[str, Any] | None = None) -> bytes:
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            delta.update(more or {})
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return sse(self._envelope("chat.completion.chunk", [choice]))
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        return sse(self._envelope("text_completion", [choice]))

    async def stream(self, first: Event, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks(first, events):
                yield chunk
        finally:  # closed early (the client left): the engine's reply is cancelled at once
            await events.aclose()  # type: ignore[attr-defined]

    async def _chunks(self, first: Event, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        if self.chat:
            yield self._chunk("", None, role=True)
        elif self.params.echo:
            yield self._chunk(self.params.prompt, None)
        event: Event | None = first
        while event is not None:
            if isinstance(event, Token) and event.reasoning:
                if self.chat:  # a text completion has no place for it
                    yield self._chunk(None, None, more={"reasoning_content": event.text})
            elif isinstance(event, Token):
                yield self._chunk(event.text, None)
            elif isinstance(event, Done):
                for i, call in enumerate(event.tool_calls):  # each call whole, in a chunk of its own
                    yield self._chunk(None, None, more={"tool_calls": [{"index": i, **_call(call)}]})
                yield self._chunk(None if self.chat else "", event.finish_reason)
                if self.params.include_usage:
                    yield sse({**self._envelope(
                        "chat.completion.chunk" if self.chat else "text_completion", []), "usage": self._usage(event)})
                break
            elif isinstance(event, Error):  # the reply started, so the status is sent already
                yield sse(from_engine(event).body())
                break
            event = await anext(events, None)
        yield DONE_LINE


def _call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}

"""POST /api/chat and /api/generate: a request checked, its model acquired from the router (loaded if need
be, kept as `keep_alive` says), the reply streamed as NDJSON (Ollama's default) or sent whole.

A request without messages (chat) or prompt (generate) only loads the model, and with keep_alive 0
unloads it, as Ollama's do. A client that leaves cancels its reply in the engine at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.server.errors import ApiError
from app.server.model_router import ModelRouter
from app.server.ollama.describe import now
from app.server.ollama.errors import ollama_error
from app.server.ollama.images import has_images
from app.server.ollama.names import as_ollama_404, find_loaded, find_served, router_name
from app.server.ollama.ndjson import NdjsonStream
from app.server.ollama.reply import OllamaReply
from app.server.ollama.request import Basics, OllamaParams, basics, parse_chat, parse_generate
from app.server.reply_path import answer, lend
from app.server.request_json import load_request_json
from engine.protocol import Event, ModelInfo

# A reply's header listing the options that were set and had no effect here.
NO_EFFECT_HEADER = "x-tailor-options-without-effect"


class Generation:
    """The handlers of /api/chat and /api/generate over a model router."""

    def __init__(self, router: ModelRouter):
        self.router = router

    async def chat(self, request: Request) -> Response:
        return await self._reply(request, chat=True)

    async def generate(self, request: Request) -> Response:
        return await self._reply(request, chat=False)

    async def _reply(self, request: Request, chat: bool) -> Response:
        started = time.monotonic_ns()
        name = None
        try:
            body = load_request_json(await request.body())
            asked = basics(body, chat)
            name = router_name(self.router, asked.name)
            if asked.load_only:
                return await self._load(asked, name, chat, started)
            params, lease = await lend(self.router, name, lambda info: self._params(body, info, asked.name, chat),
                                       asked.keep_alive)
        except ApiError as error:
            return ollama_error(as_ollama_404(error, self.router, name) if name is not None else error)
        reply = OllamaReply(asked.name, chat, started, time.monotonic_ns() - started)
        events = lease.generate(params.messages, params.sampling, params.prompt, params.shape,
                                api="ollama " + ("chat" if params.prompt is None else "generate"))
        headers = {NO_EFFECT_HEADER: ", ".join(params.no_effect)} if params.no_effect else None

        async def whole(first: Event, events: AsyncIterator[Event]) -> Response:
            result = await reply.collect(first, events)
            return ollama_error(result) if isinstance(result, ApiError) else JSONResponse(result, headers=headers)

        return await answer(request, lease, events, stream=asked.stream, whole=whole, refuse=ollama_error,
                            streamed=lambda first, events: NdjsonStream(reply.stream(first, events),
                                                                        on_close=lease.release, headers=headers))

    async def _params(self, body: Any, info: ModelInfo, name: str, chat: bool) -> OllamaParams:
        parse = parse_chat if chat else parse_generate
        if has_images(body):  # decoding images takes a while: not on the event loop
            return await asyncio.to_thread(parse, body, info, name)
        return parse(body, info, name)

    async def _load(self, asked: Basics, name: str, chat: bool, started: int) -> Response:
        """Load the model (or, with keep_alive 0, let it go) and say so, as Ollama answers an empty request."""
        unload = asked.keep_alive == 0
        if unload and find_loaded(self.router, name) is None:  # nothing to load only to unload
            if find_served(self.router.listing(), name) is None:
                raise ApiError(404, f"model '{name}' not found")
        else:
            lease = await self.router.acquire(name, asked.keep_alive)
            lease.release()
        body: dict[str, Any] = {"model": asked.name, "created_at": now()}
        body.update({"message": {"role": "assistant", "content": ""}} if chat else {"response": ""})
        body.update(done=True, done_reason="unload" if unload else "load")
        if not unload:
            body["load_duration"] = body["total_duration"] = time.monotonic_ns() - started
        return JSONResponse(body)

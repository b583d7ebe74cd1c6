"""Ollama's routes, wired into the server's app in one place (openai_app.create_app): the listings
(/api/version, /api/tags, /api/ps, /api/show) here, replies in generation.py, downloads in pull.py.

Embeddings (/api/embed, /api/embeddings) are not served yet; nor are the routes that build, copy, push
or delete models in Ollama's own store (/api/create, /api/copy, /api/push, /api/delete): they answer a
501 that says what to use instead.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.server.config import ServerConfig
from app.server.errors import ApiError
from app.server.model_router import ModelRouter
from app.server.ollama.describe import ps_entry, tags_entry
from app.server.ollama.embed import OllamaEmbed
from app.server.ollama.errors import model_not_found, ollama_error
from app.server.ollama.facts import FactsCache
from app.server.ollama.generation import Generation
from app.server.ollama.names import find_served, requested_name
from app.server.ollama.pull import Pull
from app.server.ollama.show import show_body
from app.server.request_json import load_request_json

# The Ollama release whose API this server speaks (clients check it before using thinking, tools...).
OLLAMA_VERSION = "0.12.0"
_ELSEWHERE = {
    "/api/create": "Models are not built here: Tailor serves GGUF files and model folders as they are.",
    "/api/copy": "Models are not copied here: Tailor serves each model under the name of its file.",
    "/api/push": "Models are not pushed anywhere from here.",
    "/api/delete": "Models are not deleted through this API: use `tailor rm` (or the Models window).",
}


def routes(router: ModelRouter, config: ServerConfig) -> list[Route]:
    """Ollama's API over `router`, for create_app's route list."""
    api = _Listings(router)
    generation = Generation(router)
    pull = Pull()
    embed = OllamaEmbed(router)
    found = [
        Route("/", api.root, methods=["GET", "HEAD"]),
        Route("/api/version", api.version, methods=["GET", "HEAD"]),
        Route("/api/tags", api.tags, methods=["GET", "HEAD"]),
        Route("/api/ps", api.ps, methods=["GET"]),
        Route("/api/show", api.show, methods=["POST"]),
        Route("/api/chat", generation.chat, methods=["POST"]),
        Route("/api/generate", generation.generate, methods=["POST"]),
        Route("/api/pull", pull.pull, methods=["POST"]),
        Route("/api/embed", embed.embed, methods=["POST"]),
        Route("/api/embeddings", embed.embeddings, methods=["POST"]),
    ]
    return found + [Route(path, _elsewhere, methods=["POST", "DELETE"]) for path in _ELSEWHERE]


async def _elsewhere(request: Request) -> Response:
    return ollama_error(ApiError(501, _ELSEWHERE[request.url.path]))


class _Listings:
    def __init__(self, router: ModelRouter):
        self.router = router
        self.facts = FactsCache()

    async def root(self, request: Request) -> Response:
        return PlainTextResponse("Ollama is running")  # what clients look for before they call the API

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": OLLAMA_VERSION})

    async def tags(self, request: Request) -> Response:
        listing = await asyncio.to_thread(self.router.listing)  # plans each model once (a header read)
        loaded = {m.model.id: m.info for m in self.router.loaded()}
        facts = await asyncio.gather(*(asyncio.to_thread(self.facts.facts, m.path) for m in listing))
        entries = [tags_entry(m, f, loaded.get(m.id)) for m, f in zip(listing, facts, strict=True)]
        return JSONResponse({"models": entries})

    async def ps(self, request: Request) -> Response:
        loaded = self.router.loaded()
        facts = await asyncio.gather(*(asyncio.to_thread(self.facts.facts, m.model.path) for m in loaded))
        entries = [ps_entry(m, f) for m, f in zip(loaded, facts, strict=True)]
        entries.sort(key=lambda e: e["expires_at"], reverse=True)  # as Ollama lists them: longest left first
        return JSONResponse({"models": entries})

    async def show(self, request: Request) -> Response:
        try:
            body = load_request_json(await request.body())
            name = requested_name(body)
            verbose = body.get("verbose")
            if verbose is not None and not isinstance(verbose, bool):
                raise ApiError(400, "'verbose' must be a boolean.", param="verbose")
            listing = await asyncio.to_thread(self.router.listing)
            model = find_served(listing, name)
            if model is None:
                raise model_not_found(name, [m.id for m in listing])
        except ApiError as error:
            return ollama_error(error)
        loaded = next((m.info for m in self.router.loaded() if m.model.id == model.id), None)
        facts = await asyncio.to_thread(self.facts.facts, model.path)
        projector = None
        if loaded is not None and loaded.projector:
            projector = await asyncio.to_thread(self.facts.facts, loaded.projector)
        return JSONResponse(show_body(model, facts, loaded, bool(verbose), projector))

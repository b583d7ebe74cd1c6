"""POST /v1/embeddings, OpenAI's shape: the route and its handler.

Fields are checked before the model is looked up (a 400 names a field before a 404 names the model), against
the model the request would reach where the router knows it without loading anything; a client that leaves
while its inputs are embedded cancels them in the engine.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.server.config import ServerConfig
from app.server.embeddings.params import parse_embedding
from app.server.embeddings.response import embeddings_body
from app.server.embeddings.service import embed_with
from app.server.errors import ApiError
from app.server.model_router import ModelRouter
from app.server.request_json import load_request_json
from app.server.streaming import ClientGone, unless_disconnected


def routes(router: ModelRouter, config: ServerConfig) -> list[Route]:
    """The embeddings API's routes, for create_app's list."""

    async def create(request: Request) -> Response:
        try:
            body = load_request_json(await request.body())
            name = body.get("model") if isinstance(body, dict) else None
            params = parse_embedding(body, router.stand_in(name if isinstance(name, str) else None))
            result = await unless_disconnected(embed_with(router, params.model, params.inputs), request.receive)
            content = embeddings_body(result.embeddings, result.model, params.encoding)
        except ClientGone:
            return Response(status_code=499)
        except ApiError as error:
            return Response(error.body_bytes(), status_code=error.status, media_type="application/json")
        return Response(content, media_type="application/json")

    return [Route("/v1/embeddings", create, methods=["POST"])]

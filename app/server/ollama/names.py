"""Model names as Ollama's clients send them, matched to the router's: `name`, `name:latest`, any case."""

from __future__ import annotations

from typing import Any

from app.server.errors import ApiError
from app.server.model_router import LoadedModel, ModelRouter, ServedModel
from app.server.ollama.errors import model_not_found, model_required

LATEST = ":latest"


def requested_name(body: Any) -> str:
    """The request's `model` (Ollama's older `name` too), or a 400."""
    name = body.get("model") or body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise model_required()
    return name.strip()


def _candidates(name: str) -> tuple[str, ...]:
    # Ollama tags every name, `:latest` when none was given: a client may add it to a name listed without.
    bare = name[: -len(LATEST)] if name.lower().endswith(LATEST) else name
    return (name, bare) if bare != name else (name,)


def find_served(listing: list[ServedModel], name: str) -> ServedModel | None:
    """The model `name` names: exactly, without `:latest`, or ignoring case (Ollama's names are)."""
    for candidate in _candidates(name):
        for model in listing:
            if candidate in model.names:
                return model
    for candidate in _candidates(name):
        for model in listing:
            if candidate.lower() in (n.lower() for n in model.names):
                return model
    return None


def router_name(router: ModelRouter, name: str) -> str:
    """The name to acquire: the listed model's id where `name` is one of its forms, else `name` as sent."""
    served = find_served(router.listing(), name)
    return served.id if served is not None else name


def find_loaded(router: ModelRouter, name: str) -> LoadedModel | None:
    models = router.loaded()
    served = find_served([m.model for m in models], name)
    return next((m for m in models if m.model is served), None) if served is not None else None


def as_ollama_404(error: ApiError, router: ModelRouter, name: str) -> ApiError:
    """A router's 404 in Ollama's words (its message points at the OpenAI listing)."""
    if error.status != 404:
        return error
    return model_not_found(name, [m.id for m in router.listing()])

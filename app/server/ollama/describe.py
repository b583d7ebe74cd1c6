"""The router's models in Ollama's shapes: a /api/tags entry, a /api/ps entry, the `details` both carry,
and the `capabilities` /api/show and /api/tags list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.server.model_router import LoadedModel, ServedModel
from app.server.ollama.facts import FileFacts, human_number
from engine.protocol import ModelInfo

# Ollama's `expires_at` for a model kept loaded for good: now plus Go's longest duration (2^63 - 1 ns).
FOREVER = timedelta(microseconds=(2**63 - 1) // 1000)


def rfc3339(moment: datetime | float) -> str:
    """A time as Ollama writes it (RFC 3339, UTC, with the fraction of a second)."""
    when = moment if isinstance(moment, datetime) else datetime.fromtimestamp(moment, UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def now() -> str:
    return rfc3339(datetime.now(UTC))


def capabilities(facts: FileFacts, info: ModelInfo | None) -> list[str]:
    """What the model does, in Ollama's words: completion, tools, thinking, vision.

    A loaded model's are what the engine found when it loaded it; another's, what its chat template says
    (vision is known only once it is loaded with its projector).
    """
    tools = info.tool_format is not None if info is not None else facts.tools
    thinking = info.reasoning_format is not None if info is not None else facts.thinking
    found = ["completion"]
    found += ["tools"] if tools else []
    found += ["thinking"] if thinking else []
    found += ["vision"] if info is not None and info.vision else []
    return found


def details(model: ServedModel, facts: FileFacts, info: ModelInfo | None) -> dict[str, Any]:
    family = model.family or (info.architecture if info is not None else None) or \
        facts.metadata.get("general.architecture") or ""
    families = [family] if family else []
    if info is not None and info.vision:
        families.append("clip")  # as Ollama lists a model with a vision projector
    n_params = info.n_params if info is not None and info.n_params else facts.parameter_count
    return {"parent_model": "", "format": model.format, "family": family, "families": families,
            "parameter_size": human_number(n_params) if n_params else "",
            "quantization_level": model.quant or facts.quant or ""}


def tags_entry(model: ServedModel, facts: FileFacts, info: ModelInfo | None) -> dict[str, Any]:
    """One model of /api/tags: its size is the file's, as Ollama's is its blobs' (the router's for a folder)."""
    modified = model.modified or facts.modified
    return {"name": model.id, "model": model.id, "modified_at": rfc3339(modified), "size": facts.size or model.size_bytes,
            "digest": facts.digest, "details": details(model, facts, info),
            "capabilities": capabilities(facts, info)}


def ps_entry(loaded: LoadedModel, facts: FileFacts) -> dict[str, Any]:
    """One model of /api/ps: its memory (the plan's forecast where the router has one, else its file)."""
    memory = loaded.memory_bytes
    size = sum(memory.values()) if memory else loaded.model.size_bytes
    vram = sum(b for device, b in memory.items() if device != "cpu")
    expires = FOREVER if loaded.expires_in_s is None else timedelta(seconds=loaded.expires_in_s)
    return {"name": loaded.model.id, "model": loaded.model.id, "size": size, "size_vram": vram,
            "digest": facts.digest, "details": details(loaded.model, facts, loaded.info),
            "expires_at": rfc3339(datetime.now(UTC) + expires), "context_length": loaded.info.n_ctx}

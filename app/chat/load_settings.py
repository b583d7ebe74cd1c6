"""The part of a chat's settings that a model load depends on."""

from __future__ import annotations

from dataclasses import replace

from app.services.history.store import ChatSettings
from app.services.planning.load_planner import LoadSettings
from models.plan.folder_plan import is_model_folder


def load_settings_of(
    settings: ChatSettings, pinned_prompts: tuple[str, ...] = (), model_path: str | None = None
) -> LoadSettings:
    """The part of a chat's settings that needs the model loaded again when it changes,
    with the pinned presets' prompts to prefill when it is.

    Speculative decoding counts for a GGUF file and a model folder alike; the PyTorch engine's
    settings count only for a model folder (`model_path`): two chats that differ only in them do
    not reload a GGUF model when you switch between them.
    """
    # The cap counts only for Auto: changing it under a fixed context reloads nothing.
    cap = {"auto_ctx_cap": settings.auto_ctx_cap} if settings.n_ctx is None else {}
    speculation = settings.speculation
    # The draft model counts only while "Draft model" is chosen: the engines refuse a draft with another mode.
    if speculation.mode != "draft":
        speculation = replace(speculation, draft_path=None)
    load = LoadSettings(settings.n_ctx, settings.kv_type, settings.flash_attn, pinned_prompts,
                        speculation=speculation, **cap)
    if model_path is not None and not is_model_folder(model_path):
        return load
    return replace(load, torch=settings.torch)

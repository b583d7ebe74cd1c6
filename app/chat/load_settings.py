"""The part of a chat's settings that a model load depends on."""

from __future__ import annotations

from dataclasses import replace

from app.services.history.store import ChatSettings
from app.services.load_settings import LoadSettings
from models.plan.folder_plan import is_model_folder

_DEFAULTS = LoadSettings()


def load_settings_of(
    settings: ChatSettings, pinned_prompts: tuple[str, ...] = (), model_path: str | None = None
) -> LoadSettings:
    """The part of a chat's settings that needs the model loaded again when it changes,
    with the pinned presets' prompts to prefill when it is.

    Speculative decoding counts for a GGUF file and a model folder alike; the PyTorch engine's
    settings count only for a model folder (`model_path`): two chats that differ only in them do
    not reload a GGUF model when you switch between them.
    """
    load = replace(settings.load, pinned_prompts=pinned_prompts)
    # The cap counts only for Auto: changing it under a fixed context reloads nothing.
    if load.n_ctx is not None:
        load = replace(load, auto_ctx_cap=_DEFAULTS.auto_ctx_cap)
    # The draft model counts only while "Draft model" is chosen: the engines refuse a draft with another mode.
    if load.speculation.mode != "draft":
        load = replace(load, speculation=replace(load.speculation, draft_path=None))
    if model_path is not None and not is_model_folder(model_path):
        load = replace(load, torch=_DEFAULTS.torch)
    return load

"""The user's settings of a torch engine load (LoadRequest): checked, and the draft model they name.

The settings: the GPU memory share of the KV pool, the CPU KV budget, and speculative decoding
(off, prompt lookup, or a draft model that must share the target's tokenizer, token for token).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from engine.backend import BackendError
from engine.protocol import LoadRequest
from engine.torch.arch import CausalLM, load_model
from engine.torch.hf_tokenizer import HfTokenizer
from engine.torch.model_config import CheckpointError, ModelConfig
from models.plan.load_options import SPECULATIVE_MODES

DEFAULT_SPECULATIVE_TOKENS = 4


@dataclass(frozen=True, slots=True)
class Speculation:
    """How this load decodes: mode "off", "lookup" or "draft", with k drafts per step."""

    mode: str
    tokens: int


def check(request: LoadRequest) -> None:
    """Refuse settings the engine cannot honour, with the setting named (BackendError "bad_request"):
    the KV memory (`request.torch`) and speculative decoding (`request.speculation`)."""
    options = request.torch
    if not 0.0 < options.gpu_memory_fraction <= 1.0:
        raise BackendError(
            "bad_request", f"The GPU memory fraction must be in (0, 1], not {options.gpu_memory_fraction}."
        )
    if options.cpu_kv_bytes is not None and options.cpu_kv_bytes <= 0:
        raise BackendError("bad_request", f"The CPU KV budget must be positive, not {options.cpu_kv_bytes} bytes.")
    # The Literal type is a promise to type checkers only: a request can still carry any string.
    spec = request.speculation
    if spec.mode not in SPECULATIVE_MODES:
        raise BackendError(
            "bad_request",
            f"Unknown speculative decoding {spec.mode!r}: use one of {', '.join(SPECULATIVE_MODES)}.",
        )
    if spec.mode == "draft" and not spec.draft_path:
        raise BackendError("bad_request", "Speculative decoding with a draft model needs the draft model's folder.")
    if spec.draft_path and spec.mode not in ("draft", "auto"):
        raise BackendError("bad_request", f"A draft model was given, but speculative decoding is {spec.mode!r}.")
    if spec.tokens is not None and not 1 <= spec.tokens <= 16:
        raise BackendError("bad_request", f"Draft tokens per step must be 1 to 16, not {spec.tokens}.")


def speculation(request: LoadRequest, auto_tokens: int) -> Speculation:
    """The mode a (checked) request asks for; "auto" means `auto_tokens` prompt-lookup drafts (0: off)."""
    spec = request.speculation
    k = spec.tokens or DEFAULT_SPECULATIVE_TOKENS
    mode = spec.mode
    if mode == "auto":
        if spec.draft_path:
            return Speculation("draft", k)
        return Speculation("lookup", auto_tokens) if auto_tokens > 0 else Speculation("off", 0)
    return Speculation(mode, 0 if mode == "off" else k)


def load_draft(path: str, target: HfTokenizer, device: torch.device, dtype: torch.dtype) -> CausalLM:
    """The draft model of `path`, in the target's dtype; refused unless its tokenizer is the target's.

    Raises:
        BackendError("invalid_model"): not a model folder, another tokenizer, or no room for it.
    """
    directory = Path(path).expanduser()
    name = f"The draft model {directory.name}"
    try:
        ModelConfig.from_dir(directory)
        tokenizer = HfTokenizer(directory)
    except CheckpointError as exc:
        raise BackendError("invalid_model", f"{name}: {exc}") from None
    ours = target.tokenizer.get_vocab(with_added_tokens=True)
    theirs = tokenizer.tokenizer.get_vocab(with_added_tokens=True)
    if ours != theirs:
        differ = sum(1 for text, i in theirs.items() if ours.get(text) != i) + max(0, len(ours) - len(theirs))
        raise BackendError(
            "invalid_model",
            f"{name} has another tokenizer than the model ({len(theirs)} vs {len(ours)} tokens, "
            f"{differ} differ): a draft must share the model's tokenizer.",
        )
    try:
        loaded = load_model(directory, device, dtype)
    except CheckpointError as exc:
        raise BackendError("invalid_model", f"{name}: {exc}") from None
    except torch.OutOfMemoryError:
        raise BackendError("invalid_model", f"{name} does not fit on {device} beside the model") from None
    if loaded.config.vocab_size < target.vocab_size:
        raise BackendError(
            "invalid_model",
            f"{name} has {loaded.config.vocab_size} output tokens, fewer than the tokenizer's {target.vocab_size}.",
        )
    return loaded.model

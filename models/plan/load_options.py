"""What a user chooses for a model load, shared by the chat store, the planner and the engine.

The KV cache type and flash attention (llama.cpp's), `SpeculativeOptions`, speculative decoding
(both engines: a GGUF file and a model folder), and `TorchOptions`, the PyTorch engine's KV memory
(a model folder; the GGUF backend ignores them). It lives here, the lowest layer, because the
folder plan (models/plan/folder_plan.py) sizes the KV pool with them, the engine's LoadRequest carries
them, and the app's chat settings store them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

KvType = Literal["f16", "q8_0", "q4_0"]  # a quantized V cache needs flash attention
FlashAttn = Literal["on", "off", "auto"]  # the user's choice; the LoadRequest carries it resolved (a bool)
# "auto": prompt lookup on the CPU, off on a GPU (a draft model when one is given); "lookup": drafts
# by n-gram match in the prompt; "draft": a smaller model of the same tokenizer drafts.
Speculative = Literal["auto", "off", "lookup", "draft"]
SPECULATIVE_MODES: tuple[str, ...] = get_args(Speculative)


# A GGUF draft's vocabulary may be this many tokens longer or shorter than the model's, as llama.cpp's own
# speculative decoding allows: converters pad a vocabulary to the embedding's size, which differs within a
# family (Qwen2.5's GGUFs hold 151,936 tokens at 0.5B and 152,064 at 7B, the same tokens before that). The
# engine checks it at load, the library's draft search before suggesting a file.
MAX_VOCAB_SIZE_DIFFERENCE = 128


@dataclass(slots=True, frozen=True)
class SpeculativeOptions:
    """Speculative decoding of a load, for either engine; each engine checks what it supports."""

    mode: Speculative = "auto"
    # The draft model, for "draft" (or "auto", which then drafts with it): a model folder for the
    # PyTorch engine, a .gguf file for the GGUF engine.
    draft_path: str | None = None
    tokens: int | None = None  # drafts per step; None: the engine's default


@dataclass(slots=True, frozen=True)
class TorchOptions:
    """The PyTorch engine's load options: the KV memory."""

    # Share of the GPU memory left after the weights that the KV block pool may take.
    gpu_memory_fraction: float = 0.9
    cpu_kv_bytes: int | None = None  # the KV budget on the CPU; None: the engine's default

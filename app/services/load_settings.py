"""What a model load depends on, as the user chose it: the planner plans it, a chat stores it.

Its own small module so that the chat history (ChatSettings.load) holds it without importing the
planner, which detects the machine and searches the library for drafts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.services.chat_defaults import DEFAULT_AUTO_CTX_CAP
from engine.protocol import DEFAULT_PARALLEL
from models.plan.load_options import FlashAttn, KvType, SpeculativeOptions, TorchOptions


@dataclass(slots=True, frozen=True)
class LoadSettings:
    """What the user chose for a load: context length, KV cache type, flash attention."""

    n_ctx: int | None = None  # None: Context: Auto, the largest that fits (at most auto_ctx_cap tokens)
    kv_type: KvType = "f16"
    flash_attn: FlashAttn = "auto"  # on: every llama.cpp backend Tailor uses has it
    # System prompts of pinned presets, prefilled at load. Not compared: a changed pin takes
    # effect at the next load and never forces one.
    pinned_prompts: tuple[str, ...] = field(default=(), compare=False)
    speculation: SpeculativeOptions = SpeculativeOptions()  # speculative decoding (either engine), as LoadRequest's
    # The PyTorch engine's options (a model folder; the GGUF backend ignores them), as LoadRequest's.
    torch: TorchOptions = TorchOptions()
    auto_ctx_cap: int = DEFAULT_AUTO_CTX_CAP  # the most tokens Auto picks (below the trained length)
    n_parallel: int = DEFAULT_PARALLEL  # replies at once, sharing the KV cache (`tailor serve --parallel`)
    mmproj: str | None = None  # a GGUF model's projector (images, audio), as LoadRequest's

    def resolved_flash_attn(self) -> tuple[bool, str | None]:
        """Flash attention on or off, and why when the choice was overruled."""
        if self.kv_type != "f16" and self.flash_attn == "off":
            return True, f"A {self.kv_type} KV cache needs flash attention: it is on despite the setting."
        return self.flash_attn != "off", None

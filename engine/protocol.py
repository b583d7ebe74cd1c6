"""Messages exchanged between the EngineClient and the engine process.

Everything that crosses the process boundary is one of these dataclasses; they are
pickled over a multiprocessing pipe, so they hold plain data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# ---------------------------------------------------------------- requests (client -> engine)


@dataclass(slots=True, frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(slots=True, frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class LoadRequest:
    """Load a model file; replaces whatever model is loaded."""

    path: str
    n_ctx: int = 4096
    n_gpu_layers: int = 0
    n_threads: int | None = None
    kv_type: str = "f16"  # "f16", "q8_0" or "q4_0"; a quantized V cache needs flash attention
    flash_attn: bool = True
    # RAM budget of the prefix cache (saved KV states of recent conversations); 0 turns it off.
    prefix_cache_bytes: int = 1 << 30
    # Folder of the disk tier, so prefixes survive an engine restart; None keeps them in RAM only.
    prefix_cache_dir: str | None = None
    prefix_cache_disk_bytes: int = 4 << 30


@dataclass(slots=True, frozen=True)
class GenerateRequest:
    request_id: int
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # A raw prompt continued as is, without the chat template (the server's /v1/completions);
    # when set, `messages` is ignored.
    prompt: str | None = None


@dataclass(slots=True, frozen=True)
class CancelRequest:
    request_id: int


@dataclass(slots=True, frozen=True)
class UnloadRequest:
    pass


@dataclass(slots=True, frozen=True)
class ShutdownRequest:
    pass


Request = LoadRequest | GenerateRequest | CancelRequest | UnloadRequest | ShutdownRequest

# ---------------------------------------------------------------- events (engine -> client)


@dataclass(slots=True, frozen=True)
class ModelInfo:
    path: str
    name: str
    architecture: str
    n_ctx: int
    n_ctx_train: int
    n_params: int
    size_bytes: int
    has_chat_template: bool


@dataclass(slots=True, frozen=True)
class Loaded:
    info: ModelInfo
    load_s: float


@dataclass(slots=True, frozen=True)
class Unloaded:
    pass


@dataclass(slots=True, frozen=True)
class Token:
    request_id: int
    text: str


@dataclass(slots=True, frozen=True)
class GenerationStats:
    """Figures of one reply; times in seconds, rates in tokens per second."""

    ttft_s: float
    prompt_tokens: int
    cached_tokens: int
    gen_tokens: int
    prefill_tok_s: float
    decode_tok_s: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "ttft_s": round(self.ttft_s, 4),
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "gen_tokens": self.gen_tokens,
            "prefill_tok_s": round(self.prefill_tok_s, 2),
            "decode_tok_s": round(self.decode_tok_s, 2),
        }


FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(slots=True, frozen=True)
class Done:
    request_id: int
    text: str
    finish_reason: FinishReason
    stats: GenerationStats


ErrorKind = Literal[
    "invalid_model",  # missing, not a GGUF, truncated or rejected by llama.cpp
    "template",  # chat template unsafe, broken, or over its time/size limit
    "no_model",  # generate before a successful load
    "context_overflow",  # the prompt does not fit the context window
    "bad_request",  # settings the engine cannot honour (an unknown KV type, ...)
    "engine_died",  # the engine process exited unexpectedly
    "internal",  # anything else; the message says what
]


@dataclass(slots=True, frozen=True)
class Error:
    kind: ErrorKind
    message: str
    request_id: int | None = None


@dataclass(slots=True, frozen=True)
class DeviceMemory:
    """Where the bytes of one device go; `free_bytes` is what the OS/driver says is left."""

    device: str  # "cpu" or "cuda:N"
    weights_bytes: int
    kv_allocated_bytes: int
    kv_used_bytes: int
    compute_bytes: int
    other_bytes: int
    free_bytes: int
    total_bytes: int


@dataclass(slots=True, frozen=True)
class MemoryReport:
    devices: tuple[DeviceMemory, ...]
    kv_tokens_used: int
    kv_tokens_total: int


Event = Loaded | Unloaded | Token | Done | Error | MemoryReport

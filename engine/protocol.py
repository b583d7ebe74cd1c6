"""Messages exchanged between the EngineClient and the engine process.

Everything that crosses the process boundary is one of these dataclasses; they are
pickled over a multiprocessing pipe, so they hold plain data only.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass, field
from typing import Literal

from models.plan.load_options import KvType, SpeculativeOptions, TorchOptions

# ---------------------------------------------------------------- requests (client -> engine)


@dataclass(slots=True, frozen=True)
class ToolCall:
    """A call of one of the request's tools, as the model wrote it (OpenAI's `tool_calls` item)."""

    id: str
    name: str
    arguments: str  # JSON text of an object, as OpenAI sends it


MediaKind = Literal["image", "audio"]


@dataclass(slots=True, frozen=True)
class Media:
    """An image (or a clip of audio) a message carries, ready for the model's projector.

    The app decodes the file (app/services/media: formats, limits, orientation; a WAV's channels mixed and
    its rate converted) and sends the pixels or the samples, so the engine never parses a media file. `id`
    is a SHA-256 (hex) of the original file and how it was decoded: the same picture or clip sent again is
    known to the prefix cache, and not encoded again.
    """

    kind: MediaKind
    id: str
    data: bytes = field(repr=False)  # RGB rows, 3 bytes a pixel (image); little-endian float32 mono (audio)
    width: int = 0  # pixels (an image)
    height: int = 0
    # Samples a second of an audio clip: it must be the projector's (ModelInfo.audio_sample_rate), as libmtmd
    # takes samples without their rate; the engine refuses any other.
    sample_rate: int = 0


@dataclass(slots=True, frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    # An assistant turn's calls of tools (its content may be empty then).
    tool_calls: tuple[ToolCall, ...] = ()
    # A tool turn: the answer to the call with this id, from the tool of that name.
    tool_call_id: str | None = None
    name: str | None = None
    # Images (and audio) of the message, in order; the model sees them before its text (as Ollama's
    # `images` and LM Studio place them). Only a model loaded with a projector (LoadRequest.mmproj) takes them.
    media: tuple[Media, ...] = ()


# How much a reasoning model thinks before it answers: "auto" leaves it to the template's default,
# "on"/"off" switch it where the template can, low/medium/high set an effort (gpt-oss's
# reasoning_effort; "on" elsewhere).
Reasoning = Literal["auto", "on", "off", "low", "medium", "high"]
REASONING_CHOICES: tuple[Reasoning, ...] = ("auto", "on", "off", "low", "medium", "high")


@dataclass(slots=True, frozen=True)
class ReplyShape:
    """What a reply may be besides free text: its reasoning, a JSON schema it must follow, tools.

    JSON travels as text so the request stays plain, immutable data.
    """

    reasoning: Reasoning = "auto"
    # Reasoning tokens after which the engine closes the think block and the model answers; None: no cap.
    think_budget: int | None = None
    # The answer must be JSON of this schema (JSON text); '{"type": "object"}' for OpenAI's json_object mode.
    json_schema: str | None = None
    # OpenAI's `tools` (JSON text of the list), rendered by the model's template and parsed back out.
    tools: str | None = None
    # "auto", "none", "required", or the name of the one function the reply must call.
    tool_choice: str = "auto"
    # Several calls in one reply (OpenAI's parallel_tool_calls); False: at most one.
    parallel_calls: bool = True


@dataclass(slots=True, frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()


# Replies at once on one loaded model (the window's chat and `tailor serve`'s clients share them), and
# the most that may be asked: each is a sequence of one llama.cpp context, or of the PyTorch engine's batch.
DEFAULT_PARALLEL = 4
MAX_PARALLEL = 64


@dataclass(slots=True, frozen=True)
class LoadRequest:
    """Load a model file; replaces whatever model is loaded."""

    path: str
    n_ctx: int = 4096
    n_gpu_layers: int = 0
    n_threads: int | None = None
    kv_type: KvType = "f16"
    flash_attn: bool = True
    # llama.cpp's full-size KV cache for sliding-window layers (Gemma 2/3 and others): it keeps
    # every cell, so any earlier prefix can be reused; False keeps only each window (less memory;
    # a prompt that goes back further than the window is prefilled again). The plan decides.
    swa_full: bool = True
    # Each GPU's share of the GPU layers, in llama.cpp's device order (its tensor_split, with the
    # layer split); the plan gives it for several GPUs so the engine loads what was forecast.
    # Empty: llama.cpp's own split, by each GPU's free memory at load time.
    tensor_split: tuple[float, ...] = ()
    # RAM budget of the prefix cache (saved KV states of recent conversations); 0 turns it off,
    # with parking (other sequences kept in the KV cache): only the live sequence is reused.
    prefix_cache_bytes: int = 1 << 30
    # Folder of the disk tier, so prefixes survive an engine restart; None keeps them in RAM only.
    prefix_cache_dir: str | None = None
    prefix_cache_disk_bytes: int = 4 << 30
    # System prompts of pinned presets: prefilled at load and kept in the KV cache, so a new chat
    # that starts with one of them skips its prefill.
    pinned_prompts: tuple[str, ...] = ()
    # Folder where the engine keeps a status file (its latest memory report, for `tailor mem`);
    # None writes none. `forecast` is the plan's forecast for these settings (Forecast.to_dict()),
    # written beside the report so readers compare the two.
    status_dir: str | None = None
    forecast: dict | None = None
    # Speculative decoding, for either engine (each refuses, by name, a mode it cannot run).
    speculation: SpeculativeOptions = SpeculativeOptions()
    # Replies the engine runs at once, batched and sharing its KV cache (`tailor serve --parallel`): the
    # GGUF engine's sequences of one context (1 for recurrent, hybrid and sliding-window models, whatever
    # is asked), the PyTorch engine's sequences of one LLMEngine step.
    n_parallel: int = DEFAULT_PARALLEL
    # Where a GGUF draft model goes: the plan leaves room for it there. None: on the GPU when every
    # layer of the model is there, else on the CPU.
    draft_on_gpu: bool | None = None
    # The PyTorch engine's options (a model folder; the GGUF backend ignores them).
    torch: TorchOptions = TorchOptions()
    # A GGUF model's multimodal projector (`mmproj-*.gguf`): with it the model takes images (and audio,
    # where the projector does). It goes on the GPU when any of the model's layers are there.
    mmproj: str | None = None
    # Load the GGUF model for embeddings only (EmbedRequest; no replies): its context pools each input into
    # a vector and takes n_ctx tokens in one batch, with no KV cache to plan for an encoder (BERT and kin).
    # The plan sets it for an embedding model (models/formats/embedding_models.py); the engine loads a file
    # that is one so whatever this says.
    embeddings: bool = False


@dataclass(slots=True, frozen=True)
class GenerateRequest:
    request_id: int
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # A raw prompt continued as is, without the chat template (the server's /v1/completions);
    # when set, `messages` is ignored.
    prompt: str | None = None
    shape: ReplyShape = ReplyShape()


@dataclass(slots=True, frozen=True)
class EmbedRequest:
    """Turn each input into one vector (OpenAI's /v1/embeddings, Ollama's /api/embed); answered by Embeddings or
    an Error, a bad input's naming it by index. It runs beside the replies, a batch of inputs at a time.

    An input is text, tokenized with the special tokens the model adds itself (BERT's [CLS] and [SEP], an EOS
    where the file says so; special-token text in it stays text), or the model's own token ids, taken as they
    are. Each is pooled as the model says (its pooling type); a chat model, which has none, gives the mean of
    its last hidden states, from a small context of its own beside the chat's (engine/gguf/llama_embed.py).
    """

    request_id: int
    inputs: tuple[str | tuple[int, ...], ...]
    normalize: bool = True  # each vector scaled to length 1 (OpenAI's and Ollama's are)
    # An input longer than the model embeds is cut to its first tokens (Ollama's default) instead of refused.
    truncate: bool = False


@dataclass(slots=True, frozen=True)
class CountTokensRequest:
    """How many tokens the prompt of `messages` takes, rendered by the model's template for `shape` as a
    GenerateRequest's would be and tokenized, nothing decoded (Anthropic's /v1/messages/count_tokens).
    Answered by TokenCount or an Error; it does not wait for the replies running."""

    request_id: int
    messages: tuple[ChatMessage, ...]
    shape: ReplyShape = ReplyShape()


@dataclass(slots=True, frozen=True)
class CancelRequest:
    request_id: int


@dataclass(slots=True, frozen=True)
class CancelLoadRequest:
    """Stop every load asked for so far that has not ended (the one running, those queued behind replies);
    each is answered by Error(kind="load_cancelled"), or by its Loaded when it ended first."""


@dataclass(slots=True, frozen=True)
class UnloadRequest:
    pass


@dataclass(slots=True, frozen=True)
class ShutdownRequest:
    pass


Request = (LoadRequest | GenerateRequest | CountTokensRequest | EmbedRequest | CancelRequest | CancelLoadRequest
           | UnloadRequest | ShutdownRequest)

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
    # One line when the model did not load as planned (fewer GPU layers: the GPU was gone or full).
    notice: str | None = None
    # What the chat template speaks (engine/reply/reasoning_formats.py, engine/reply/tool_formats.py): the name
    # of its reasoning format and of its tool-call format; None: it has none.
    reasoning_format: str | None = None
    tool_format: str | None = None
    # What the model takes besides text, through its projector (LoadRequest.mmproj); None: no projector.
    projector: str | None = None
    vision: bool = False
    audio: bool = False
    # Samples a second the projector hears (audio is sent resampled to it: Media.sample_rate); None: no audio.
    audio_sample_rate: int | None = None
    # Loaded for embeddings only (LoadRequest.embeddings, or a file that is an embedding model): it writes no
    # replies. `n_embd`: the width of its vectors (every model embeds: EmbedRequest); 0 where not known.
    embeddings: bool = False
    n_embd: int = 0


# What a load is doing: reading the weights (into RAM, or mapped), reading them with some layers copied
# to the GPU, or making the context (the KV cache and compute buffers) once the weights are in.
LoadStage = Literal["reading", "offloading", "context"]


@dataclass(slots=True, frozen=True)
class LoadProgress:
    """How far the load running now has got; sent while it loads, at most every 2 % or 100 ms.

    `fraction` (0..1) is of the weights' bytes (the GGUF engine: llama.cpp's own count) or of the layers
    (the PyTorch engine); a load that falls back to fewer GPU layers starts again from 0.
    """

    fraction: float
    stage: LoadStage


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
    # Text of the model's reasoning (its think block or analysis channel), not of its answer.
    reasoning: bool = False


@dataclass(slots=True, frozen=True)
class GenerationStats:
    """Figures of one reply; times in seconds, rates in tokens per second."""

    ttft_s: float
    # None: not known (a remote server that reports no usage); the local engines always know.
    prompt_tokens: int | None
    cached_tokens: int | None
    gen_tokens: int
    prefill_tok_s: float
    decode_tok_s: float
    # Share of speculative drafts the model accepted (PyTorch engine); None when nothing was drafted.
    draft_acceptance: float | None = None
    # Of gen_tokens, those the model spent reasoning, and how long that took (the "Thought for 12 s").
    reasoning_tokens: int = 0
    reasoning_s: float = 0.0

    def as_dict(self) -> dict[str, float | int | None]:
        figures: dict[str, float | int | None] = {
            "ttft_s": round(self.ttft_s, 4),
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "gen_tokens": self.gen_tokens,
            "prefill_tok_s": round(self.prefill_tok_s, 2),
            "decode_tok_s": round(self.decode_tok_s, 2),
        }
        if self.draft_acceptance is not None:
            figures["draft_acceptance"] = round(self.draft_acceptance, 3)
        figures["reasoning_tokens"] = self.reasoning_tokens
        if self.reasoning_tokens:
            figures["reasoning_s"] = round(self.reasoning_s, 3)
        return figures


FinishReason = Literal["stop", "length", "cancelled", "tool_calls"]


@dataclass(slots=True, frozen=True)
class Done:
    request_id: int
    text: str  # the answer alone
    finish_reason: FinishReason
    stats: GenerationStats
    reasoning: str = ""  # what the model thought first (kept when it was cut off: see reasoning_closed)
    tool_calls: tuple[ToolCall, ...] = ()
    # False when the reply ended inside its reasoning (max tokens, stop pressed): the reasoning is partial.
    reasoning_closed: bool = True
    # The stop string (SamplingParams.stop) that ended the reply; None when it ended otherwise.
    stop_string: str | None = None


@dataclass(slots=True, frozen=True)
class TokenCount:
    """The answer to a CountTokensRequest: the prompt's tokens, as a reply's stats.prompt_tokens counts them."""

    request_id: int
    tokens: int


@dataclass(slots=True, frozen=True)
class Embeddings:
    """The answer to an EmbedRequest: one vector per input, in order, each `dim` float32 in little-endian
    bytes (OpenAI's base64 form, as is); `tokens`: each input's tokens, as evaluated."""

    request_id: int
    vectors: tuple[bytes, ...] = field(repr=False)
    tokens: tuple[int, ...] = ()

    @property
    def dim(self) -> int:
        return len(self.vectors[0]) // 4 if self.vectors else 0

    def floats(self, index: int) -> list[float]:
        """The vector of input `index` as Python floats."""
        values = array("f", self.vectors[index])
        if sys.byteorder == "big":
            values.byteswap()
        return values.tolist()


ErrorKind = Literal[
    "invalid_model",  # missing, not a GGUF, truncated or rejected by llama.cpp
    "template",  # chat template unsafe, broken, or over its time/size limit
    "no_model",  # generate before a successful load
    "context_overflow",  # the prompt does not fit the context window
    "bad_request",  # settings the engine cannot honour (an unknown KV type, ...)
    "engine_died",  # the engine process exited unexpectedly
    "remote",  # a remote endpoint failed: unreachable, timed out, an HTTP error or a malformed stream
    "busy",  # every reply slot is taken (a server's queue timed out)
    "load_cancelled",  # the client cancelled the load (CancelLoadRequest): no model is loaded now
    "cancelled",  # the client cancelled a request before its answer (an EmbedRequest's, by CancelRequest)
    "internal",  # anything else; the message says what
]


@dataclass(slots=True, frozen=True)
class Error:
    kind: ErrorKind
    message: str
    request_id: int | None = None


@dataclass(slots=True, frozen=True)
class DeviceMemory:
    """Where the bytes of one device go, as the engine's backend accounts for them.

    The parts are this process's: weights, the KV cache (allocated; `kv_used_bytes` of it hold
    tokens), compute/activation buffers, the prefix cache's RAM tier (host only) and `other`
    (the rest of the process: RSS on the host, NVML's per-process figure on a GPU, minus the
    parts above). `free_bytes` is what the OS or the driver says is left; whatever of
    `total_bytes` is neither ours nor free is held by other programs.
    """

    device: str  # "cpu" or "cuda:N" (any backend: "cpu" is host RAM)
    weights_bytes: int
    kv_allocated_bytes: int
    kv_used_bytes: int
    compute_bytes: int
    other_bytes: int
    free_bytes: int
    total_bytes: int
    kv_used_tokens: int = 0  # tokens whose KV cells live here (each device holds its layers' cells)
    kv_total_tokens: int = 0  # cells this device's KV cache has room for
    prefix_cache_bytes: int = 0  # saved sequence states held in this device's memory
    draft_bytes: int = 0  # a speculative draft model's weights, KV cache and compute buffers here
    projector_bytes: int = 0  # a multimodal projector's weights and compute buffer here
    name: str = ""  # what people call it: "NVIDIA GeForce RTX 4090", "RAM"

    @property
    def process_bytes(self) -> int:
        """Everything this engine process holds on the device."""
        return (self.weights_bytes + self.kv_allocated_bytes + self.compute_bytes + self.prefix_cache_bytes
                + self.draft_bytes + self.projector_bytes + self.other_bytes)

    def to_dict(self) -> dict[str, int | str]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True, frozen=True)
class MemoryReport:
    """The engine's memory, per device; sent after a load, while generating and on every change.

    `kv_tokens_used` counts the KV cells holding tokens over all sequences, a prefix shared
    by several sequences once; `kv_tokens_total` is the cells the cache has. `kv_shared_tokens`
    and `kv_shared_bytes` are the part of the used cells that more than one sequence reads (the
    PyTorch engine's KV blocks with a reference count above 1; 0 elsewhere). `kv_cached_tokens`
    are free cells that still hold a finished reply's prefix, which the next request that starts
    the same way reuses (the PyTorch engine's cached blocks; 0 for GGUF, whose live chat counts
    as in use). `kv_sequence_tokens` are the tokens each conversation in the GGUF cache holds (one
    per reply running at once, and the last finished one), of `parallel` that may run together.
    """

    devices: tuple[DeviceMemory, ...]
    kv_tokens_used: int
    kv_tokens_total: int
    prefix_cache_disk_bytes: int = 0  # the prefix cache's disk tier (not memory, shown beside it)
    kv_shared_tokens: int = 0
    kv_shared_bytes: int = 0
    kv_cached_tokens: int = 0
    kv_sequence_tokens: tuple[int, ...] = ()
    parallel: int = 1

    def device(self, name: str) -> DeviceMemory | None:
        return next((d for d in self.devices if d.device == name), None)

    def to_dict(self) -> dict:
        return {
            "devices": [d.to_dict() for d in self.devices],
            "kv_tokens_used": self.kv_tokens_used,
            "kv_tokens_total": self.kv_tokens_total,
            "prefix_cache_disk_bytes": self.prefix_cache_disk_bytes,
            "kv_shared_tokens": self.kv_shared_tokens,
            "kv_shared_bytes": self.kv_shared_bytes,
            "kv_cached_tokens": self.kv_cached_tokens,
            "kv_sequence_tokens": list(self.kv_sequence_tokens),
            "parallel": self.parallel,
        }

    @classmethod
    def from_dict(cls, data: dict) -> MemoryReport:
        """The inverse of `to_dict` (the status file a running engine writes)."""
        fields = DeviceMemory.__slots__
        return cls(
            devices=tuple(DeviceMemory(**{k: v for k, v in d.items() if k in fields}) for d in data["devices"]),
            kv_tokens_used=int(data["kv_tokens_used"]),
            kv_tokens_total=int(data["kv_tokens_total"]),
            prefix_cache_disk_bytes=int(data.get("prefix_cache_disk_bytes", 0)),
            kv_shared_tokens=int(data.get("kv_shared_tokens", 0)),
            kv_shared_bytes=int(data.get("kv_shared_bytes", 0)),
            kv_cached_tokens=int(data.get("kv_cached_tokens", 0)),
            kv_sequence_tokens=tuple(int(n) for n in data.get("kv_sequence_tokens", ())),
            parallel=int(data.get("parallel", 1)),
        )


Event = Loaded | LoadProgress | Unloaded | Token | Done | Error | MemoryReport | TokenCount | Embeddings

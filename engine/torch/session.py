"""One loaded model folder: the model, its tokenizer, the KV pool and the engine that schedules over it.

`open_session` turns a LoadRequest into a TorchSession, or a BackendError that names what is wrong
(the checkpoint, a setting, the draft model, or no room for the weights or the KV cache).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch

from engine.backend import BackendError
from engine.load_watch import ProgressFn
from engine.protocol import MAX_PARALLEL, LoadRequest, LoadStage, ModelInfo
from engine.reply.prompt import render_pinned
from engine.torch.arch import CausalLM, LoadedModel, load_model
from engine.torch.attention import KVCache
from engine.torch.config import EngineConfig
from engine.torch.hf_tokenizer import HfTokenizer
from engine.torch.kv_pool import BLOCK_SIZE, MAX_BATCHED_TOKENS, cpu_kv_budget, kv_blocks
from engine.torch.llm_engine import LLMEngine
from engine.torch.load_settings import check, load_draft, speculation
from engine.torch.model_config import CheckpointError, ModelConfig
from engine.torch.model_runner import ModelRunner
from engine.torch.sequence import SamplingOptions
from engine.torch.speculative import Drafter, DraftModelDrafter, PromptLookupDrafter, SpeculativeRunner
from models.formats.errors import InvalidModelFile
from models.plan.folder_plan import cpu_ram_budget, cpu_weights, folder_candidate, int4_file_bytes
from models.units import gb

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TorchSession:
    model: CausalLM
    tokenizer: HfTokenizer
    kv: KVCache
    runner: ModelRunner
    engine: LLMEngine
    spec: SpeculativeRunner | None  # speculative decoding, when on
    info: ModelInfo


def open_session(request: LoadRequest, device: torch.device, auto_speculative_tokens: int,
                 progress: ProgressFn | None = None) -> TorchSession:
    """Load `request.path` on `device` and build its engine; pinned system prompts are prefilled.

    `auto_speculative_tokens`: prompt-lookup drafts per step when the request says "auto" (0: off).
    `progress`: told the share of the layers read; its False stops the load (BackendError "load_cancelled").
    """
    directory = Path(request.path).expanduser()
    check(request)
    spec = speculation(request, auto_speculative_tokens)
    if request.n_threads and device.type == "cpu":
        torch.set_num_threads(request.n_threads)  # this process serves one model: its threads are ours
    try:
        ModelConfig.from_dir(directory)  # the architecture and the size are checked before anything heavy
        int4 = _cpu_int4(directory, request) if device.type == "cpu" else None
        tokenizer = HfTokenizer(directory)
        on_layer = _layer_progress(progress, device, directory)
        loaded = load_model(directory, device, awq_int4=int4, on_layer=on_layer)
    except CheckpointError as exc:
        raise BackendError("invalid_model", str(exc)) from None
    except torch.OutOfMemoryError:
        raise BackendError("invalid_model", f"{directory.name}: the weights do not fit on {device}") from None
    model, config = loaded.model, loaded.config
    if tokenizer.vocab_size > config.vocab_size:
        raise BackendError(
            "invalid_model",
            f"{directory.name}: the tokenizer has {tokenizer.vocab_size} tokens, the model only {config.vocab_size}",
        )
    draft = None
    if spec.mode == "draft":
        draft = load_draft(request.speculation.draft_path or "", tokenizer, device, model.dtype)
    if on_layer is not None:
        on_layer(1.0, "context")  # the weights are in: the KV cache comes next
    max_len = max(2, min(request.n_ctx, config.max_position_embeddings,
                         draft.config.max_position_embeddings if draft else config.max_position_embeddings))
    try:
        blocks = kv_blocks(request, device, max_len, [m for m in (model, draft) if m is not None])
        kv = KVCache(config.num_layers, blocks, BLOCK_SIZE, config.num_kv_heads, config.head_dim, model.dtype, device)
    except torch.OutOfMemoryError:
        raise BackendError(
            "invalid_model", f"{directory.name}: no room on {device} for a KV cache of {max_len} tokens"
        ) from None
    engine_config = EngineConfig(
        num_kv_blocks=kv.num_blocks,
        block_size=BLOCK_SIZE,
        # The replies that run at once (`tailor serve --parallel`): the host starts no more than this.
        max_num_seqs=max(1, min(request.n_parallel, MAX_PARALLEL)),
        max_num_batched_tokens=MAX_BATCHED_TOKENS,
        max_model_len=max_len,
        eos_token_ids=tuple(sorted(set(config.eos_token_ids) | tokenizer.eos_ids)),
        num_speculative_tokens=spec.tokens,
    )
    runner = ModelRunner(model, kv, engine_config)
    speculative = _speculative(draft, runner, engine_config, device) if spec.tokens > 0 else None
    engine = LLMEngine(engine_config, speculative or runner)
    info = _model_info(directory, loaded, tokenizer, max_len)
    session = TorchSession(model, tokenizer, kv, runner, engine, speculative, info)
    _pin(session, request.pinned_prompts)
    return session


def _speculative(draft: CausalLM | None, runner: ModelRunner, config: EngineConfig,
                 device: torch.device) -> SpeculativeRunner:
    """The runner that drafts `config.num_speculative_tokens` a step: from the draft model when there is one, else prompt lookup."""
    drafter: Drafter = PromptLookupDrafter()
    if draft is not None:
        try:
            drafter = DraftModelDrafter(draft, config, config.num_kv_blocks, BLOCK_SIZE)
        except torch.OutOfMemoryError:
            raise BackendError("invalid_model", f"no room on {device} for the draft's KV cache") from None
    return SpeculativeRunner(runner, drafter)


def _model_info(directory: Path, loaded: LoadedModel, tokenizer: HfTokenizer, max_len: int) -> ModelInfo:
    """What the engine tells the front ends of the loaded folder."""
    model, config = loaded.model, loaded.config
    return ModelInfo(
        path=str(directory),
        name=directory.name,
        architecture=config.family + config.quant_label,
        n_ctx=max_len,
        n_ctx_train=config.max_position_embeddings,
        n_params=sum(b.numel() for b in model.buffers()) - model.rope.cos.numel() - model.rope.sin.numel(),
        size_bytes=loaded.file_bytes,
        has_chat_template=tokenizer.has_chat_template,
        reasoning_format=tokenizer.formats.reasoning.name if tokenizer.formats.reasoning else None,
        tool_format=tokenizer.formats.tools.name if tokenizer.formats.tools else None,
    )


def _layer_progress(
    progress: ProgressFn | None, device: torch.device, directory: Path
) -> Callable[..., None] | None:
    """load_model's `on_layer` for the host's `progress`: a cancel raises the load's error."""
    if progress is None:
        return None
    where: LoadStage = "offloading" if device.type == "cuda" else "reading"

    def on_layer(fraction: float, stage: LoadStage = where) -> None:
        if not progress(fraction, stage):
            raise BackendError("load_cancelled", f"Loading {directory.name} was cancelled.")

    return on_layer


def _cpu_int4(directory: Path, request: LoadRequest) -> bool:
    """Whether 4-bit AWQ/GPTQ weights stay 4-bit on the CPU (fp32 would not fit in RAM); a model that fits
    neither way is refused here, before a byte of it is read."""
    try:
        candidate = folder_candidate(directory)
    except (InvalidModelFile, ValueError, OSError):
        return False  # load_model says what is wrong with the folder
    available = psutil.virtual_memory().available
    pool = cpu_kv_budget(request, available)
    held = cpu_weights(candidate.shape, int4_file_bytes(candidate), pool, available)
    if held.kind == "none":
        as_int4 = f" ({gb(held.int4_bytes)} kept 4-bit)" if held.int4_bytes is not None else ""
        raise BackendError(
            "invalid_model",
            f"{directory.name} is too big for this machine's memory: its weights need {gb(held.fp32_bytes)} in fp32"
            f"{as_int4} beside a KV cache of {gb(pool)}, and {gb(cpu_ram_budget(available))} of RAM are "
            "free to use. Use a smaller model or a GGUF file of it.",
        )
    return held.kind == "int4"


def _pin(session: TorchSession, system_prompts: tuple[str, ...]) -> None:
    """Prefill each pinned system prompt once: its blocks stay in the prefix cache for new chats."""
    engine = session.engine
    for text in system_prompts:
        prompt = render_pinned(session.tokenizer.template, text)
        if prompt is None:
            continue
        tokens = session.tokenizer.encode(prompt)
        if 0 < len(tokens) < engine.config.max_model_len:
            engine.generate([tokens], SamplingOptions(max_tokens=1))

"""The PyTorch backend: a Hugging Face model folder (dense or AWQ safetensors) behind the engine host.

It renders the chat template in the same sandbox as the GGUF backend, tokenizes with the
`tokenizers` package, and runs requests through LLMEngine (paged KV cache with prefix caching,
so the next turn of a conversation prefills only what is new). A greedy request may be
decoded speculatively with prompt-lookup drafts (`speculative`), which leaves its output unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import torch

from engine.backend import BackendError
from engine.chat_template import ChatTemplateError
from engine.device_memory import DeviceMeter
from engine.protocol import (
    ChatMessage,
    Done,
    FinishReason,
    GenerateRequest,
    GenerationStats,
    LoadRequest,
    MemoryReport,
    ModelInfo,
)
from engine.stop_strings import StopStringFilter
from engine.torch.arch import CausalLM, load_model
from engine.torch.attention import KVCache
from engine.torch.config import EngineConfig
from engine.torch.hf_tokenizer import HfTokenizer, IncrementalDecoder
from engine.torch.llm_engine import LLMEngine
from engine.torch.load_settings import DEFAULT_SPECULATIVE_TOKENS, check, load_draft, speculation
from engine.torch.memory_report import EMPTY, TorchMemory, measure, report
from engine.torch.model_config import CheckpointError, ModelConfig
from engine.torch.model_runner import ModelRunner
from engine.torch.sequence import SamplingOptions
from engine.torch.speculative import Drafter, DraftModelDrafter, PromptLookupDrafter, SpeculativeRunner

log = logging.getLogger(__name__)

BLOCK_SIZE = 16
# The KV pool on the CPU: a fixed budget (pages are only touched as blocks fill).
CPU_KV_BUDGET_BYTES = 1 << 30
MAX_NUM_SEQS = 8
MAX_BATCHED_TOKENS = 512
# Prompt-lookup drafts per decode step on the CPU, where verifying 5 tokens costs about what 1 does
# (the weights are read once either way); on CUDA, decode runs in CUDA graphs instead.
CPU_SPECULATIVE_TOKENS = DEFAULT_SPECULATIVE_TOKENS


def is_torch_model_dir(path: str | Path) -> bool:
    """Whether `path` is a Hugging Face model folder (served by this backend, not llama.cpp)."""
    p = Path(path).expanduser()
    return p.is_dir() and (p / "config.json").is_file()


class TorchBackend:
    def __init__(self, device: str | None = None, speculative_tokens: int | None = None):
        """`speculative_tokens`: prompt-lookup drafts per step when a load asks for "auto" speculation
        (default: CPU_SPECULATIVE_TOKENS on the CPU, none on a GPU)."""
        self._device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if speculative_tokens is None:
            speculative_tokens = CPU_SPECULATIVE_TOKENS if self._device.type == "cpu" else 0
        self._speculative_tokens = speculative_tokens
        self._meter = DeviceMeter()
        self._spec: SpeculativeRunner | None = None
        # Share of prompt-lookup drafts the target accepted in the latest reply (None: no drafts).
        self.last_acceptance_rate: float | None = None
        self._model: CausalLM | None = None
        self._tokenizer: HfTokenizer | None = None
        self._engine: LLMEngine | None = None
        self._runner: ModelRunner | None = None
        self._kv: KVCache | None = None
        self._info: ModelInfo | None = None

    # ------------------------------------------------------------ loading

    def load(self, request: LoadRequest) -> ModelInfo:
        directory = Path(request.path).expanduser()
        self.close()
        check(request)
        spec = speculation(request, self._speculative_tokens)
        if request.n_threads and self._device.type == "cpu":
            torch.set_num_threads(request.n_threads)  # this process serves one model: its threads are ours
        try:
            ModelConfig.from_dir(directory)  # the architecture is checked before anything heavy
            tokenizer = HfTokenizer(directory)
            loaded = load_model(directory, self._device)
        except CheckpointError as exc:
            raise BackendError("invalid_model", str(exc)) from None
        except torch.OutOfMemoryError:
            raise BackendError("invalid_model", f"{directory.name}: the weights do not fit on {self._device}") from None
        model, config = loaded.model, loaded.config
        if tokenizer.vocab_size > config.vocab_size:
            raise BackendError(
                "invalid_model",
                f"{directory.name}: the tokenizer has {tokenizer.vocab_size} tokens, the model only {config.vocab_size}",
            )
        draft = None
        if spec.mode == "draft":
            draft = load_draft(request.draft_path or "", tokenizer, self._device, model.dtype)
        max_len = max(2, min(request.n_ctx, config.max_position_embeddings,
                             draft.config.max_position_embeddings if draft else config.max_position_embeddings))
        try:
            kv = KVCache(
                config.num_layers,
                self._kv_blocks(request, max_len, model, draft),
                BLOCK_SIZE,
                config.num_kv_heads,
                config.head_dim,
                model.dtype,
                self._device,
            )
        except torch.OutOfMemoryError:
            raise BackendError(
                "invalid_model", f"{directory.name}: no room on {self._device} for a KV cache of {max_len} tokens"
            ) from None
        eos = tuple(sorted(set(config.eos_token_ids) | tokenizer.eos_ids))
        engine_config = EngineConfig(
            num_kv_blocks=kv.num_blocks,
            block_size=BLOCK_SIZE,
            max_num_seqs=MAX_NUM_SEQS,
            max_num_batched_tokens=MAX_BATCHED_TOKENS,
            max_model_len=max_len,
            eos_token_ids=eos,
            num_speculative_tokens=spec.tokens,
        )
        self._runner = ModelRunner(model, kv, engine_config)
        if spec.tokens > 0:
            drafter: Drafter = PromptLookupDrafter()
            if draft is not None:
                try:
                    drafter = DraftModelDrafter(draft, engine_config, kv.num_blocks, BLOCK_SIZE)
                except torch.OutOfMemoryError:
                    raise BackendError("invalid_model", f"no room on {self._device} for the draft's KV cache") from None
            self._spec = SpeculativeRunner(self._runner, drafter)
            self._engine = LLMEngine(engine_config, self._spec)
        else:
            self._spec = None
            self._engine = LLMEngine(engine_config, self._runner)
        self._model, self._tokenizer, self._kv = model, tokenizer, kv
        params = sum(b.numel() for b in model.buffers()) - model.rope.cos.numel() - model.rope.sin.numel()
        self._info = ModelInfo(
            path=str(directory),
            name=directory.name,
            architecture=config.family + (" AWQ" if config.awq else ""),
            n_ctx=max_len,
            n_ctx_train=config.max_position_embeddings,
            n_params=params,
            size_bytes=loaded.file_bytes,
            has_chat_template=tokenizer.has_chat_template,
        )
        self._pin(request.pinned_prompts)
        return self._info

    def _pin(self, system_prompts: tuple[str, ...]) -> None:
        """Prefill each pinned system prompt once: its blocks stay in the prefix cache for new chats."""
        engine, tokenizer = self._engine, self._tokenizer
        if engine is None or tokenizer is None or tokenizer.template is None:
            return
        for text in system_prompts:
            try:
                prompt = tokenizer.template.render([ChatMessage("system", text)], add_generation_prompt=False)
            except ChatTemplateError as exc:
                log.warning("a pinned system prompt was not prefilled: %s", exc)
                continue
            tokens = tokenizer.encode(prompt)
            if 0 < len(tokens) < engine.config.max_model_len:
                engine.generate([tokens], SamplingOptions(max_tokens=1))

    def _kv_blocks(self, request: LoadRequest, max_len: int, model: CausalLM, draft: CausalLM | None) -> int:
        """Blocks of the KV pool: the user's share of free GPU memory, or the CPU budget (a draft
        model keeps its own pool of as many blocks, so it counts in every block)."""
        c = model.config
        per_block = sum(
            2 * m.config.num_layers * BLOCK_SIZE * m.config.num_kv_heads * m.config.head_dim * m.dtype.itemsize
            for m in (model, draft) if m is not None
        )
        if self._device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(self._device)
            reserve = MAX_BATCHED_TOKENS * (c.hidden_size * 8 + c.intermediate_size * 3 + c.vocab_size) * 4
            budget = int(free * request.gpu_memory_fraction) - reserve
        elif request.cpu_kv_bytes is not None:
            budget = request.cpu_kv_bytes  # the user's budget, even above the default share of RAM
        else:
            budget = min(CPU_KV_BUDGET_BYTES, psutil.virtual_memory().available // 4)
        # At least one full-length sequence, whatever the budget says.
        return max(budget // per_block, -(-max_len // BLOCK_SIZE) + 1)

    def close(self) -> None:
        self._model = self._tokenizer = self._engine = self._runner = self._kv = self._info = self._spec = None
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    # ------------------------------------------------------------ generation

    def generate(
        self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]
    ) -> Done:
        engine, tokenizer = self._engine, self._tokenizer
        if engine is None or tokenizer is None:
            raise BackendError("no_model", "No model is loaded.")
        t_start = time.perf_counter()
        tokens = self._prompt_tokens(request)
        limit = engine.config.max_model_len
        if len(tokens) >= limit:
            raise BackendError(
                "context_overflow",
                f"The conversation is {len(tokens)} tokens long; the context holds {limit}. "
                "Start a new chat or raise the context length.",
            )
        s = request.sampling
        try:
            options = SamplingOptions(
                temperature=max(0.0, s.temperature),
                top_p=s.top_p if 0.0 < s.top_p <= 1.0 else 1.0,
                top_k=max(0, s.top_k),
                max_tokens=max(1, s.max_tokens),
                seed=s.seed,
            )
        except ValueError as exc:
            raise BackendError("bad_request", str(exc)) from None
        seq_id = engine.add_request(tokens, options)
        spec = self._spec
        proposed0, accepted0 = (spec.proposed, spec.accepted) if spec is not None else (0, 0)
        stops = StopStringFilter(s.stop)
        decoder = IncrementalDecoder(tokenizer)
        pieces: list[str] = []
        finish: FinishReason = "length"
        n_gen = cached = 0
        t_first = t_last = None
        done = False
        while not done:
            if cancelled():
                engine.abort(seq_id)
                finish = "cancelled"
                break
            for out in engine.step():
                if out.seq_id != seq_id:
                    continue
                if out.finish_reason == "error":
                    raise BackendError("context_overflow", out.error or "the request could not run")
                if t_first is None:
                    seq = engine.get_sequence(seq_id)
                    cached = seq.num_cached_tokens if seq is not None else 0
                    t_first = time.perf_counter()
                t_last = time.perf_counter()
                if out.token_id is not None and not (out.finished and out.token_id in engine.config.eos_token_ids):
                    n_gen += 1
                    text = stops.feed(decoder.feed(out.token_id))
                    if text:
                        pieces.append(text)
                        emit(text)
                if out.finished:
                    finish = "stop" if out.finish_reason == "stop" else "length"
                    done = True
                elif stops.stopped:
                    engine.abort(seq_id)
                    finish, done = "stop", True
                if done:
                    break
        while engine.has_unfinished():  # report the abort, free its blocks
            engine.step()
        tail = stops.feed(decoder.flush()) + stops.flush() if not stops.stopped else ""
        if tail and finish != "cancelled":
            pieces.append(tail)
            emit(tail)
        t_end = time.perf_counter()
        t_first = t_first or t_end
        proposed = spec.proposed - proposed0 if spec is not None else 0
        self.last_acceptance_rate = (spec.accepted - accepted0) / proposed if spec is not None and proposed else None
        if self.last_acceptance_rate is not None:
            log.info("reply %d: %d drafts, %.0f%% accepted", request.request_id, proposed, 100 * self.last_acceptance_rate)
        prefill_s = max(t_first - t_start, 1e-9)
        decode_s = (t_last or t_end) - t_first
        stats = GenerationStats(
            ttft_s=prefill_s,
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            gen_tokens=n_gen,
            prefill_tok_s=(len(tokens) - cached) / prefill_s,
            decode_tok_s=(n_gen - 1) / decode_s if n_gen > 1 and decode_s > 0 else 0.0,
            draft_acceptance=self.last_acceptance_rate,
        )
        return Done(request.request_id, "".join(pieces), finish, stats)

    def _prompt_tokens(self, request: GenerateRequest) -> list[int]:
        tokenizer = self._tokenizer
        assert tokenizer is not None
        if request.prompt is not None:  # a raw completion: no chat template
            text = request.prompt
        else:
            if tokenizer.template is None:
                raise BackendError("template", tokenizer.template_error or "The model has no usable chat template.")
            try:
                text = tokenizer.template.render(request.messages)
            except ChatTemplateError as exc:
                raise BackendError("template", str(exc)) from None
        tokens = tokenizer.encode(text)
        if not tokens:
            raise BackendError("bad_request", "The prompt is empty.")
        return tokens

    # ------------------------------------------------------------ memory

    def details(self) -> TorchMemory:
        kv, engine, model, runner = self._kv, self._engine, self._model, self._runner
        if kv is None or engine is None or model is None or runner is None:
            return EMPTY
        return measure(engine, model, kv, runner)

    def memory(self) -> MemoryReport:
        return report(self.details(), self._device, BLOCK_SIZE, self._meter)

"""GGUF backend on llama-cpp-python: load, render the chat template, stream, reuse the KV prefix.

Prefix reuse has two sources: the sequence still in llama.cpp's context (the same
conversation's next turn), and the prefix cache of saved sequence states (a conversation
switched back to, a shared system prompt). When the cache shares a longer prefix with the
prompt than the live context, its state is restored into sequence 0 first. The live state is
saved into the cache when a prompt is about to drop a long part of it: saving costs a copy of
its KV bytes, so the same conversation's next turn never pays it.
"""

from __future__ import annotations

import codecs
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import llama_cpp
import psutil

from engine.backend import BackendError
from engine.chat_template import ChatTemplate, ChatTemplateError
from engine.gguf.file_check import InvalidModelFile, check_gguf_path
from engine.gguf.log_bridge import LlamaLogBridge
from engine.gguf.memory_report import gguf_memory_report
from engine.gguf.prefix_cache import (
    CacheEntry,
    CacheKey,
    PrefixCache,
    common_prefix_len,
    model_identity,
    restore_state,
    save_state,
    settings_key,
)
from engine.gguf.prefix_store import PrefixStore
from engine.protocol import (
    Done,
    FinishReason,
    GenerateRequest,
    GenerationStats,
    LoadRequest,
    MemoryReport,
    ModelInfo,
)
from engine.stop_strings import StopStringFilter

log = logging.getLogger(__name__)

# ggml type ids of the KV cache types offered.
KV_CACHE_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}

# Used when a GGUF carries no chat template: ChatML, the most common instruct format.
FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# A live sequence is saved into the prefix cache when a prompt drops at least this many of
# its tokens; shorter tails are cheaper to prefill again than to copy.
MIN_SAVED_TOKENS = 64
# A cached state is restored only when it shares at least this many more tokens with the
# prompt than the live context does.
MIN_RESTORE_GAIN = 16


class GgufBackend:
    """One llama.cpp model and context, used by one engine process."""

    def __init__(self, log_bridge: LlamaLogBridge):
        self._logs = log_bridge
        self._llm: llama_cpp.Llama | None = None
        self._template: ChatTemplate | None = None
        self._template_error: str | None = None
        self._info: ModelInfo | None = None
        self._add_bos = True
        self._bos_text = ""
        self._cache = PrefixCache(0)
        self._cache_key: CacheKey | None = None
        self._store: PrefixStore | None = None

    # ------------------------------------------------------------ loading

    def load(self, request: LoadRequest) -> ModelInfo:
        path = Path(request.path).expanduser()
        try:
            check_gguf_path(path)
        except InvalidModelFile as exc:
            raise BackendError("invalid_model", str(exc)) from None
        kv_type = KV_CACHE_TYPES.get(request.kv_type)
        if kv_type is None:
            raise BackendError(
                "bad_request", f"Unknown KV cache type {request.kv_type!r}: use f16, q8_0 or q4_0."
            )
        if request.kv_type != "f16" and not request.flash_attn:
            raise BackendError("bad_request", f"A {request.kv_type} KV cache needs flash attention on.")
        self.close()
        self._logs.reset_buffers()
        try:
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=request.n_ctx,
                n_gpu_layers=request.n_gpu_layers,
                n_threads=request.n_threads or default_threads(),
                n_batch=min(512, request.n_ctx),
                flash_attn=request.flash_attn,
                type_k=kv_type,
                type_v=kv_type,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            detail = "; ".join(self._logs.recent_errors) or str(exc)
            raise BackendError(
                "invalid_model", f"{path.name}: llama.cpp could not load it ({detail})"
            ) from None
        self._llm = llm
        self._cache.budget_bytes = max(0, request.prefix_cache_bytes)
        self._cache_key = CacheKey(
            model_identity(path),
            settings_key(llm.n_ctx(), request.kv_type, request.flash_attn, request.n_gpu_layers),
        )
        if request.prefix_cache_dir:
            self._store = PrefixStore(Path(request.prefix_cache_dir), request.prefix_cache_disk_bytes)
        meta = llm.metadata
        self._bos_text = _token_text(llm, llm.token_bos())
        self._add_bos = meta.get("tokenizer.ggml.add_bos_token", "true") != "false"
        source = meta.get("tokenizer.chat_template")
        # A template that fails to compile is reported when the user sends, not at load:
        # the model itself is fine and the error belongs to the message.
        try:
            self._template = ChatTemplate(
                source or FALLBACK_TEMPLATE,
                bos_token=self._bos_text,
                eos_token=_token_text(llm, llm.token_eos()),
            )
            self._template_error = None
        except ChatTemplateError as exc:
            self._template, self._template_error = None, str(exc)
        model = llm.model
        self._info = ModelInfo(
            path=str(path),
            name=meta.get("general.name") or path.stem,
            architecture=meta.get("general.architecture", "unknown"),
            n_ctx=llm.n_ctx(),
            n_ctx_train=llama_cpp.llama_model_n_ctx_train(model),
            n_params=llama_cpp.llama_model_n_params(model),
            size_bytes=llama_cpp.llama_model_size(model),
            has_chat_template=bool(source),
        )
        return self._info

    def close(self) -> None:
        if self._llm is not None:
            if self._store is not None:
                # What the context holds now is the conversation most likely resumed next.
                entry = self._save_live(self._llm, tuple(self._llm.input_ids[: self._llm.n_tokens].tolist()))
                if entry is not None:
                    self._store.put(entry)
            self._llm.close()
        if self._store is not None:
            self._store.close()
            self._store = None
        self._llm = self._template = self._info = self._cache_key = None

    # ------------------------------------------------------------ generation

    def generate(
        self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]
    ) -> Done:
        llm = self._require_model()
        t_start = time.perf_counter()
        tokens = self._prompt_tokens(request)
        n_ctx = llm.n_ctx()
        if len(tokens) >= n_ctx:
            raise BackendError(
                "context_overflow",
                f"The conversation is {len(tokens)} tokens long; the context holds {n_ctx}. "
                "Start a new chat or raise the context length.",
            )
        self._restore_cached_prefix(llm, tokens)
        cached = self._reuse_prefix(llm, tokens)
        s = request.sampling
        if s.seed is not None:
            llm.set_seed(s.seed)
        stops = StopStringFilter(s.stop)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        finish: FinishReason = "length"
        n_gen = 0
        t_first = t_last = None
        for token in llm.generate(
            tokens[cached:], reset=False, temp=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=0.05
        ):
            now = time.perf_counter()
            if t_first is None:
                t_first = now
            t_last = now
            if cancelled():
                finish = "cancelled"
                break
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                finish = "stop"
                break
            n_gen += 1
            text = stops.feed(decoder.decode(llm.detokenize([token])))
            if text:
                pieces.append(text)
                emit(text)
            if stops.stopped:
                finish = "stop"
                break
            if n_gen >= s.max_tokens or llm.n_tokens + 1 >= n_ctx:
                break
        tail = stops.feed(decoder.decode(b"", final=True)) + stops.flush()
        if tail and finish != "cancelled":
            pieces.append(tail)
            emit(tail)
        t_end = time.perf_counter()
        t_first = t_first or t_end
        prefill_s = max(t_first - t_start, 1e-9)
        decode_s = (t_last or t_end) - t_first
        stats = GenerationStats(
            ttft_s=prefill_s,
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            gen_tokens=n_gen,
            prefill_tok_s=(len(tokens) - cached) / prefill_s,
            decode_tok_s=(n_gen - 1) / decode_s if n_gen > 1 and decode_s > 0 else 0.0,
        )
        return Done(request.request_id, "".join(pieces), finish, stats)

    def _require_model(self) -> llama_cpp.Llama:
        if self._llm is None:
            raise BackendError("no_model", "No model is loaded.")
        return self._llm

    def _prompt_tokens(self, request: GenerateRequest) -> list[int]:
        if request.prompt is not None:  # a raw completion: no chat template
            raw = self._llm.tokenize(request.prompt.encode("utf-8"), add_bos=self._add_bos, special=True)
            if not raw:
                raise BackendError("bad_request", "The prompt is empty.")
            return raw
        if self._template is None:
            raise BackendError("template", self._template_error or "The model has no usable chat template.")
        try:
            prompt = self._template.render(request.messages)
        except ChatTemplateError as exc:
            raise BackendError("template", str(exc)) from None
        add_bos = self._add_bos and not (self._bos_text and prompt.startswith(self._bos_text))
        return self._llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)

    def _restore_cached_prefix(self, llm: llama_cpp.Llama, tokens: list[int]) -> None:
        """Save the live sequence if this prompt drops much of it; restore a longer cached prefix."""
        key, store = self._cache_key, self._store
        if key is None or (self._cache.budget_bytes <= 0 and store is None):
            return
        live = tuple(llm.input_ids[: llm.n_tokens].tolist())
        live_len = common_prefix_len(live, tokens)
        best, best_len = self._cache.lookup(key, tokens)
        if len(live) - live_len >= MIN_SAVED_TOKENS:
            saved = self._save_live(llm, live)
            if saved is not None and store is not None:
                store.put(saved)
        if store is not None:
            on_disk, disk_len = store.lookup(key, tokens)
            if on_disk is not None and disk_len > max(best_len, live_len + MIN_RESTORE_GAIN - 1):
                loaded = store.load(on_disk)
                if loaded is not None:
                    self._cache.put(loaded)
                    best, best_len = loaded, disk_len
        if best is None or best_len < live_len + MIN_RESTORE_GAIN:
            return
        llm._ctx.kv_cache_clear()
        llm.reset()
        if not restore_state(llm._ctx.ctx, best.state):
            log.warning("llama.cpp refused a cached state of %d tokens; dropped it", len(best.tokens))
            self._cache.remove(best)
            llm._ctx.kv_cache_clear()
            return
        llm.input_ids[: len(best.tokens)] = best.tokens
        llm.n_tokens = len(best.tokens)

    def _save_live(self, llm: llama_cpp.Llama, live: tuple[int, ...]) -> CacheEntry | None:
        """Copy the KV state of the live sequence into the cache; the entry, or None if not saved."""
        key = self._cache_key
        if key is None or len(live) < MIN_SAVED_TOKENS:
            return None
        for entry in self._cache:
            if entry.key == key and entry.tokens == live:
                return entry
        state = save_state(llm._ctx.ctx)
        if state is None:
            return None
        entry = CacheEntry(key, live, state)
        self._cache.put(entry)
        return entry

    @staticmethod
    def _reuse_prefix(llm: llama_cpp.Llama, tokens: list[int]) -> int:
        """Keep the KV cells of the longest prefix shared with the last sequence; return its length.

        At least one prompt token is always evaluated again, so sampling starts from fresh logits.
        """
        cached = min(common_prefix_len(llm.input_ids[: llm.n_tokens].tolist(), tokens), len(tokens) - 1)
        # Recurrent models cannot drop a tail of their state: start over there.
        if cached > 0 and not llm._ctx.kv_cache_seq_rm(-1, cached, -1):
            cached = 0
        if cached == 0:
            llm.reset()
            llm._ctx.kv_cache_clear()
        llm.n_tokens = cached
        return cached

    # ------------------------------------------------------------ memory

    def memory(self) -> MemoryReport:
        """llama.cpp's buffers per device, KV cells in use, the prefix cache and the rest (memory_report.py)."""
        return gguf_memory_report(self)


def _token_text(llm: llama_cpp.Llama, token: int) -> str:
    if token < 0:
        return ""
    return llm.detokenize([token], special=True).decode("utf-8", errors="replace")


def default_threads() -> int:
    # Physical cores decode fastest; hyper-threads only add contention.
    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)

"""GGUF backend on llama-cpp-python: load, render the chat template, stream, reuse the KV prefix.

llama_handle.py holds the model and its context, llama_batch.py and llama_sampler.py the rest of
llama-cpp-python's calls.
Each reply runs in a live sequence (a slot) of a context with several sequence ids, batched with
the replies beside it (reply_batch.py); prefix_reuse.py decides which prefix a slot starts from
(its own cells, another slot's, a parked sequence, a saved state in RAM or on disk), and
kv_sequences.py keeps the books of the cells they share.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from engine.backend import BackendError, run_alone
from engine.chat_template import ChatTemplate, ChatTemplateError
from engine.device_memory import DeviceMeter
from engine.gguf.devices import read_devices
from engine.gguf.draft_model import DraftModel
from engine.gguf.embedding import GgufEmbedJob, embedding_load, input_tokens
from engine.gguf.file_check import InvalidModelFile, check_gguf_path
from engine.gguf.ggml_libraries import load_backends
from engine.gguf.llama_embed import EMBED_SEQUENCES, LlamaEmbedder
from engine.gguf.llama_handle import LlamaError, LlamaHandle, LlamaSettings, gpu_offload_supported
from engine.gguf.llama_mtmd import Projector, ProjectorError
from engine.gguf.llama_sampler import GrammarRefused, Sampler
from engine.gguf.load_checks import check_load_request, default_threads
from engine.gguf.load_progress import LlamaLoadProgress
from engine.gguf.log_bridge import BufferSizes, LlamaLogBridge
from engine.gguf.media_prompt import MediaPrompt, tokenize_with_media
from engine.gguf.memory_report import GgufMemoryFigures, gguf_memory_report
from engine.gguf.next_turn import FinishedTurn, NextTurns, next_turn_tokens
from engine.gguf.offload_fallback import fallback_notice, is_out_of_memory, layer_attempts, next_attempt
from engine.gguf.prefix_cache import CacheKey, PrefixCache, model_identity, settings_key
from engine.gguf.prefix_reuse import PrefixReuse
from engine.gguf.prefix_store import PrefixStore
from engine.gguf.prompt_lookup import PromptLookup
from engine.gguf.reply_batch import Drafter, ReplyBatch, RunningReply
from engine.gguf.reply_memory import ReplyMemory
from engine.gguf.sampling import make_sampler
from engine.gguf.speculation import DEFAULT_DRAFT_TOKENS, LONG_DRAFT_TOKENS, DraftPolicy, StepFigures
from engine.load_watch import ProgressFn
from engine.openmp_policy import ThreadGovernor
from engine.protocol import (
    ChatMessage,
    CountTokensRequest,
    Done,
    EmbedRequest,
    GenerateRequest,
    LoadRequest,
    MemoryReport,
    ModelInfo,
    SamplingParams,
)
from engine.reply.prompt import render_pinned
from engine.reply.shape import ShapedPrompt, TemplateFormats, shape_prompt
from engine.reply.stream import ReplyStream, check_fits
from models.formats.embedding_models import POOLING_MEAN, POOLING_RANK
from models.plan.load_options import SpeculativeOptions

log = logging.getLogger(__name__)

# Used when a GGUF carries no chat template: ChatML, the most common instruct format.
FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Sequence ids beyond the live ones (one per reply slot): pinned system prompts stay in the KV cache
# under them, and a chat that starts with one shares its cells (nothing copied). Recurrent, hybrid and
# sliding-window models get one live sequence alone, so one reply at a time (llama_handle.py says why).
PARKED_SEQUENCES = 4
# What stands for an image (or audio) in a rendered prompt: libmtmd cuts the prompt there. Not llama.cpp's
# own "<__media__>", which a person may type (or paste from llama.cpp's docs) into a message.
MEDIA_MARKER = "<__tailor_media_5b1f__>"


class GgufBackend:
    """One llama.cpp model and context, used by one engine process."""

    def __init__(self, log_bridge: LlamaLogBridge, progress: ProgressFn | None = None):
        """`progress`: hears how far each load got; its False cancels the load (engine/load_watch.py)."""
        load_backends()  # after the log bridge, so ggml's own lines about its backends reach the log
        self._logs = log_bridge
        self._progress = progress
        self._llama: LlamaHandle | None = None
        self._template: ChatTemplate | None = None
        self._template_error: str | None = None
        self._info: ModelInfo | None = None
        self._add_bos = True
        self._bos_text = ""
        self._cache = PrefixCache(0)
        self._cache_key: CacheKey | None = None
        self._store: PrefixStore | None = None
        self._prefixes: PrefixReuse | None = None
        self._batch: ReplyBatch | None = None  # the replies running now
        self._gpu_names: dict[str, str] = {}
        self._speculation = SpeculativeOptions()
        self._draft: DraftModel | None = None
        self._draft_buffers: BufferSizes | None = None  # llama.cpp's buffers of the draft model
        self._draft_notice: str | None = None  # why Auto loaded without its draft model
        self._projector: Projector | None = None  # the model's multimodal projector (LoadRequest.mmproj)
        self._projector_id = ""  # its file's identity: part of every media token (media_prompt.py)
        self._projector_buffers: BufferSizes | None = None  # llama.cpp's buffers of the projector
        self._meter: DeviceMeter | None = None  # made at the first report, so NVML starts once
        self._formats = TemplateFormats(None, None)  # what the loaded model's template speaks
        self._next_turns = NextTurns()  # chats whose next turn is prefilled when idle
        self._replies = ReplyMemory()  # what the model wrote lately: drafts follow it too
        self._step_figures = StepFigures()  # what its steps cost, learned over its replies (speculation.py)
        # Threads as cores are free: llama.cpp's threads wait for each other at every op, so one that shares
        # its core with another program holds them all up (engine/openmp_policy.py's ThreadGovernor).
        self._governor: ThreadGovernor | None = None
        # What embeds: an embedding model's own context, or (a chat model) a context of its own beside the chat's,
        # made at the first EmbedRequest, with llama.cpp's buffers logged apart (llama_embed.py says why).
        self._embedder: LlamaEmbedder | None = None
        self._embed_buffers: BufferSizes | None = None
        self._pooling = POOLING_MEAN  # how the model pools: its own type, else the mean of its hidden states

    # ------------------------------------------------------------ loading

    def load(self, request: LoadRequest) -> ModelInfo:
        path = Path(request.path).expanduser()
        try:
            check_gguf_path(path)
        except InvalidModelFile as exc:
            raise BackendError("invalid_model", str(exc)) from None
        kv_type = check_load_request(request)
        self.close()
        embed_ctx, self._pooling = embedding_load(path, request.embeddings, request.n_ctx)
        embedding = embed_ctx is not None
        llama, n_gpu_layers, notice = self._open(path, request, kv_type, embed_ctx)
        self._llama = llama
        if embedding:
            self._embedder = LlamaEmbedder(llama)
        self._speculation = request.speculation
        self._replies = ReplyMemory()  # another model's tokens mean nothing to this one
        self._step_figures = StepFigures()
        self._draft_notice = None
        self._draft = self._open_draft(request, llama, n_gpu_layers)
        self._projector = self._open_projector(request, llama, n_gpu_layers)
        if request.n_threads is None:  # threads the user chose are kept
            params = llama.context_params
            self._governor = ThreadGovernor(max(params.n_threads, params.n_threads_batch), self._set_threads,
                                            time.monotonic())
        self._cache.budget_bytes = max(0, request.prefix_cache_bytes)
        self._cache_key = CacheKey(
            model_identity(path),
            settings_key(llama.n_ctx, request.kv_type, request.flash_attn, n_gpu_layers, request.swa_full),
        )
        if request.prefix_cache_dir:
            self._store = PrefixStore(Path(request.prefix_cache_dir), request.prefix_cache_disk_bytes)
        slots = min(max(1, request.n_parallel), llama.n_seq)
        self._prefixes = PrefixReuse(llama, self._cache_key, self._cache, self._store, slots)
        self._batch = ReplyBatch(llama, self._prefixes)
        meta = llama.metadata
        self._bos_text = _token_text(llama, llama.bos)
        self._add_bos = meta.get("tokenizer.ggml.add_bos_token", "true") != "false"
        source = meta.get("tokenizer.chat_template")
        # A template that fails to compile is reported when the user sends, not at load:
        # the model itself is fine and the error belongs to the message.
        try:
            self._template = ChatTemplate(
                source or FALLBACK_TEMPLATE,
                bos_token=self._bos_text,
                eos_token=_token_text(llama, llama.eos),
            )
            self._template_error = None
        except ChatTemplateError as exc:
            self._template, self._template_error = None, str(exc)
        self._formats = TemplateFormats.of(source)
        self._info = ModelInfo(
            path=str(path),
            name=meta.get("general.name") or path.stem,
            architecture=meta.get("general.architecture", "unknown"),
            n_ctx=llama.n_ctx,
            n_ctx_train=llama.n_ctx_train,
            n_params=llama.n_params,
            size_bytes=llama.size_bytes,
            has_chat_template=bool(source),
            notice=" ".join(n for n in (notice, self._draft_notice) if n) or None,
            reasoning_format=self._formats.reasoning.name if self._formats.reasoning else None,
            tool_format=self._formats.tools.name if self._formats.tools else None,
            projector=str(self._projector.path) if self._projector else None,
            vision=bool(self._projector and self._projector.supports_vision),
            audio=bool(self._projector and self._projector.supports_audio),
            audio_sample_rate=self._projector.audio_sample_rate if self._projector else None,
            embeddings=embedding,
            n_embd=llama.n_embd_out,
        )
        if not embedding:
            self._pin(request.pinned_prompts)
        return self._info

    def _set_threads(self, threads: int) -> None:
        for handle in (self._llama, self._draft.llama if self._draft else None):
            if handle is not None:
                handle.set_threads(threads)
        if self._embedder is not None and self._llama is not None:
            params = self._llama.context_params
            self._embedder.set_threads(min(threads, params.n_threads), min(threads, params.n_threads_batch))

    def _open(self, path: Path, request: LoadRequest, kv_type: int,
              embed_ctx: int | None = None) -> tuple[LlamaHandle, int, str | None]:
        """The model with as many of the plan's GPU layers as can be had; the count used, and why it differs.
        For embeddings only (`embed_ctx`: its context), the context takes all its tokens in one batch, in up
        to EMBED_SEQUENCES inputs."""
        embedding = embed_ctx is not None
        n_ctx = embed_ctx or request.n_ctx
        gpu_usable = gpu_offload_supported()
        devices = read_devices()
        log.info("llama.cpp devices: %s", devices.summary())
        # What CUDA calls each card, so the memory report reads NVML's figures of that very card.
        self._gpu_names = {f"cuda:{i}": d.description for i, d in enumerate(d for d in devices.gpus if d.is_cuda)}
        attempts = layer_attempts(request.n_gpu_layers, gpu_usable)
        n_gpu_layers, why = attempts[0], ""
        # A live sequence per reply slot, and with a prefix cache some to park pinned prompts in (without
        # one, no parking: only the live sequences are reused).
        slots = max(1, request.n_parallel)
        n_seq = slots + PARKED_SEQUENCES if request.prefix_cache_bytes > 0 else slots
        if embedding:
            n_seq = EMBED_SEQUENCES
        progress = LlamaLoadProgress(self._progress)
        while True:
            self._logs.reset_buffers()
            settings = LlamaSettings(
                n_ctx=n_ctx,
                n_threads=request.n_threads or default_threads(),
                n_batch=n_ctx if embedding else min(512, n_ctx),
                n_gpu_layers=n_gpu_layers,
                tensor_split=request.tensor_split,
                flash_attn=request.flash_attn,
                swa_full=request.swa_full,
                kv_type=kv_type,
                n_seq=n_seq,
                embeddings=embedding,
                pooling=self._pooling,
            )
            try:
                # A context llama.cpp refuses logged its buffers: they are not the one that stays.
                llama = LlamaHandle(path, settings, lambda: self._logs.buffers.forget("kv", "compute"),
                                    progress.attempt(n_gpu_layers, gpu_usable))
                return llama, n_gpu_layers, fallback_notice(request.n_gpu_layers, n_gpu_layers, gpu_usable, why)
            except (ValueError, RuntimeError, OSError) as exc:
                progress.check(path)  # stopped when told to: no try with fewer layers
                detail = "; ".join(self._logs.recent_errors) or str(exc)
                out_of_memory = is_out_of_memory(self._logs.recent_errors)
                retry = next_attempt(attempts, n_gpu_layers, out_of_memory)
                if retry is None:
                    raise BackendError(
                        "invalid_model", f"{path.name}: llama.cpp could not load it ({detail})"
                    ) from None
                log.warning("loading %s with %d GPU layers failed (%s); trying %d", path.name, n_gpu_layers,
                            detail, retry)
                n_gpu_layers, why = retry, "out of memory" if out_of_memory else detail

    def _open_draft(self, request: LoadRequest, llama: LlamaHandle, n_gpu_layers: int) -> DraftModel | None:
        """The draft model asked for ("draft", or "auto" with a draft file), its buffers logged apart.

        It goes where the plan left room for it (request.draft_on_gpu), else where the model is: on the GPU
        when every layer of the model is there, else on the CPU.
        """
        on_gpu = request.draft_on_gpu
        if on_gpu is None:
            on_gpu = n_gpu_layers == -1 or n_gpu_layers > llama.n_layer
        spec = request.speculation
        if spec.mode not in ("draft", "auto") or not spec.draft_path:
            return None
        settings = LlamaSettings(n_ctx=llama.n_ctx, n_threads=request.n_threads or default_threads(),
                                 n_batch=llama.n_batch, n_gpu_layers=-1 if on_gpu else 0,
                                 flash_attn=request.flash_attn)
        try:
            with self._logs.separate_buffers() as buffers:
                draft = DraftModel(Path(spec.draft_path).expanduser(), llama, settings)
        except BackendError as exc:
            if spec.mode == "auto":  # a draft Auto found, not one the user chose: without it, and say why
                log.warning("speculative decoding without a draft model: %s", exc)
                self._draft_notice = f"{exc} Drafting from the conversation only."
                return None
            self.close()  # the load failed as a whole: no model without the draft that was asked for
            raise
        self._draft_buffers = buffers
        return draft

    def _open_projector(self, request: LoadRequest, llama: LlamaHandle, n_gpu_layers: int) -> Projector | None:
        """The model's projector (LoadRequest.mmproj), its buffers logged apart; on the GPU when any of the
        model's layers are. A projector that cannot be used fails the load as a whole, naming the file."""
        if not request.mmproj:
            return None
        path = Path(request.mmproj).expanduser()
        use_gpu = n_gpu_layers != 0 and gpu_offload_supported()
        try:
            check_gguf_path(path)  # a FIFO, a device, a folder or another format is refused before any read
            self._logs.hear_projector()
            with self._logs.separate_buffers() as buffers:
                projector = Projector(path, llama, use_gpu, llama.context_params.n_threads, marker=MEDIA_MARKER)
            identity = model_identity(path)
        # ValueError: the file checks' InvalidModelFile, the header's (models/formats) and ProjectorMismatch
        except (ValueError, ProjectorError, OSError) as exc:
            self.close()  # no model without the projector that was asked for
            raise BackendError("invalid_model", f"{path.name}: {exc}") from None
        self._projector_buffers, self._projector_id = buffers, identity
        log.info("projector %s: vision %s, audio %s", path.name, projector.supports_vision, projector.supports_audio)
        return projector

    def _pin(self, system_prompts: tuple[str, ...]) -> None:
        """Prefill each pinned system prompt once; one the template cannot render alone is skipped."""
        for text in system_prompts:
            prompt = render_pinned(self._template, text)
            if prompt is None:
                continue
            tokens = self._tokenize(prompt)
            if 1 < len(tokens) < self._llama.n_ctx // 2:
                self._prefixes.pin(tokens)

    def close(self) -> None:
        if self._prefixes is not None:
            # What the context holds now is what is most likely resumed after a reload or restart.
            self._prefixes.keep_for_later()
        if self._batch is not None and self._batch.running:  # a reply's chunks of media go before the projector that made them
            self._batch.abort(BackendError("no_model", "The model was unloaded."))
        if self._embedder is not None:  # before the model it embeds with
            self._embedder.close()
            self._embedder, self._embed_buffers = None, None
        if self._projector is not None:  # before the model it was made for
            self._projector.close()
            self._projector, self._projector_buffers, self._projector_id = None, None, ""
        if self._draft is not None:
            self._draft.close()
            self._draft, self._draft_buffers = None, None
        if self._llama is not None:
            self._llama.close()
        if self._store is not None:
            self._store.close()
            self._store = None
        self._llama = self._template = self._info = self._cache_key = self._prefixes = self._batch = None
        self._governor = None
        self._next_turns.clear()

    # ------------------------------------------------------------ generation

    @property
    def free_slots(self) -> int:
        """How many more replies can start now (each runs in a slot of its own, batched with the others)."""
        return self._batch.free_slots if self._batch is not None else 0

    @property
    def running(self) -> int:
        return len(self._batch.running) if self._batch is not None else 0

    def submit(self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]) -> None:
        """Start a reply in a free slot; its tokens come with the following `step()`s. BackendError when
        the prompt cannot run (no model, no template, too long for the context, every slot taken)."""
        self._require_model()
        assert self._batch is not None and self._prefixes is not None
        if self._info is not None and self._info.embeddings:
            raise BackendError("bad_request", f"{self._info.name} is an embedding model: it turns text into vectors "
                                              "(POST /v1/embeddings) and writes no replies.")
        t_start = time.perf_counter()
        shaped = self._shaped(request)
        with_media = self._media_prompt(request, shaped)
        try:
            self._start(request, shaped, with_media, t_start, emit, cancelled)
        except BaseException:
            if with_media is not None:
                with_media.close()
            raise

    def count_tokens(self, request: CountTokensRequest) -> int:
        """The tokens `submit` would prefill for these messages (a media's positions too), nothing decoded."""
        self._require_model()
        as_reply = GenerateRequest(request.request_id, request.messages, shape=request.shape)
        shaped = self._shaped(as_reply)
        with_media = self._media_prompt(as_reply, shaped)
        if with_media is None:
            return len(self._prompt_tokens(as_reply, shaped))
        try:
            return len(with_media.tokens)
        finally:
            with_media.close()

    def _start(self, request: GenerateRequest, shaped: ShapedPrompt | None, with_media: MediaPrompt | None,
               t_start: float, emit: Callable[[str], None], cancelled: Callable[[], bool]) -> None:
        llama = self._require_model()
        tokens = with_media.tokens if with_media is not None else self._prompt_tokens(request, shaped)
        check_fits(len(tokens), llama.n_ctx)
        s = request.sampling
        reply = ReplyStream(request, len(tokens), emit, t_start, shaped)
        grammar = shaped.grammar if shaped is not None else None
        sampler = self._sampler(s, grammar if reply.in_answer else None, check=grammar)
        slot = self._batch.free_slot_for(tokens)
        cached = self._prefixes.prepare(tokens, room=len(tokens) + min(s.max_tokens, llama.n_ctx - len(tokens)),
                                        slot=slot, boundary=with_media.boundary if with_media else None)
        # Drafts are not verified through a grammar: a constrained reply decodes one token at a time.
        mode = self._speculation.mode if llama.trims_tail and grammar is None else "off"
        most = self._speculation.tokens  # the user's: the most for every step, copying or not
        policy = DraftPolicy(mode, most or DEFAULT_DRAFT_TOKENS, most or LONG_DRAFT_TOKENS, self._step_figures)
        self._batch.add(RunningReply(
            request, slot, tokens, cached, reply, sampler, policy,
            self._drafter(with_media is not None) if policy.active else None,
            cancelled, grammar=None if reply.in_answer else grammar,
            special=bool(shaped and shaped.reasoning and shaped.reasoning.special_tokens), media=with_media,
        ))

    def _shaped(self, request: GenerateRequest) -> ShapedPrompt | None:
        """The chat's prompt rendered for its shape (None for a raw completion)."""
        if request.prompt is not None:
            return None
        messages = [_with_markers(m) for m in request.messages]
        return shape_prompt(self._template, self._template_error, messages, request.shape, self._formats)

    def _media_prompt(self, request: GenerateRequest, shaped: ShapedPrompt | None) -> MediaPrompt | None:
        """The prompt cut into text and media by the projector; None for a prompt without media."""
        items = [m for message in request.messages for m in message.media] if shaped is not None else []
        if not items:
            return None
        if self._projector is None:
            kinds = " and ".join(sorted({"images" if m.kind == "image" else "audio" for m in items}))
            raise BackendError("bad_request", f"{self._info.name} cannot take {kinds}: it was loaded without a "
                                              f"projector (an mmproj-*.gguf file beside the model).")
        try:
            return tokenize_with_media(self._projector, self._projector_id, shaped.text, items,
                                       add_bos=self._adds_bos(shaped.text))
        except ProjectorError as exc:
            raise BackendError("bad_request", f"The model cannot take this message's media: {exc}.") from None

    def _sampler(self, params: SamplingParams, grammar: str | None, check: str | None = None) -> Sampler:
        """The reply's sampler chain, with `grammar` first; `check`: a grammar llama.cpp must be able to
        parse (used later, when the reasoning ends): a bad_request now if it cannot."""
        assert self._llama is not None
        try:
            if check is not None and grammar is None:
                make_sampler(params, check, self._llama.vocab_pointer).close()
            return make_sampler(params, grammar, self._llama.vocab_pointer)
        except GrammarRefused as exc:
            raise BackendError("bad_request", f"The output's grammar was refused: {exc}.") from None

    def step(self) -> list[tuple[int, Done | BackendError]]:
        """One batch of every running reply; (request id, Done or BackendError) of those that ended."""
        if self._batch is None:
            return []
        if self._governor is not None:
            self._governor.look(time.monotonic())
        try:
            ended = self._batch.step()
        except RuntimeError as exc:  # llama_decode failed outright: no reply can go on in that cache
            log.exception("a batch failed")
            ended = self._batch.abort(BackendError("internal", f"llama.cpp failed a batch: {exc}"))
        seqs = self._prefixes.seqs
        for r in ended:
            # A turn with media is not prefilled ahead: its history would need the media again. Its next turn
            # still finds the picture in the slot (the media tokens match) and prefills from the reply on.
            if isinstance(r.outcome, Done) and r.request.prompt is None and r.media is None:
                self._next_turns.finished(FinishedTurn(r.slot, seqs.tokens_of(r.slot), r.request, r.outcome))
            if isinstance(r.outcome, Done) and self._speculation.mode != "off":
                self._replies.add(r.context, len(r.prompt))
        return [(r.request.request_id, r.outcome) for r in ended if r.outcome is not None]

    def idle(self, interrupted: Callable[[], bool] = lambda: False) -> int:
        """Work for a moment with nothing to run: each chat that just ended gets its next turn's history
        prefilled (next_turn.py), until `interrupted()` (a request waits); how many tokens that took."""
        if self._prefixes is None or self.running:
            return 0

        def tokens_of(turn: FinishedTurn) -> list[int]:
            shape = turn.request.shape
            render = lambda messages: shape_prompt(  # noqa: E731 - one call, read where it is used
                self._template, self._template_error, messages, shape, self._formats).text
            return next_turn_tokens(render, self._tokenize, turn)

        try:
            return self._next_turns.warm(self._prefixes, tokens_of, interrupted)
        except RuntimeError:  # llama_decode failed outright: what the cache holds is no longer known
            log.exception("prefilling a next turn failed")
            self._prefixes.seqs.clear()
            return 0

    def generate(
        self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]
    ) -> Done:
        """One reply from start to end (steps every reply running beside it too): engine/backend.py's run_alone."""
        return run_alone(self, request, emit, cancelled)

    def _drafter(self, with_media: bool = False) -> Drafter:
        """What drafts for this reply: the draft model ("draft"), the conversation and the model's latest replies
        ("lookup"), or for Auto those where they have a match and the draft model (if any) where they have none.
        A prompt with media drafts from them alone, never into a media's positions (media_prompt.py)."""
        # The prompt is indexed at the first draft, after the first token is out (1.6 ms for 1,755 tokens).
        draft, lookup, replies = self._draft, PromptLookup(()), self._replies
        if with_media or draft is None:  # lookup's drafts never hold a media's tokens
            return lambda context, limit_for: lookup.follow(context, limit_for, replies.lookup)
        if self._speculation.mode == "draft":
            return lambda context, limit_for: draft.draft(context, limit_for(0))
        return lambda context, limit_for: (lookup.follow(context, limit_for, replies.lookup)
                                           or draft.draft(context, limit_for(0)))

    # ------------------------------------------------------------ embeddings

    def embed(self, request: EmbedRequest) -> GgufEmbedJob:
        """Start embedding the request's inputs; BackendError for one the model cannot take (naming it), before
        anything runs. A chat model embeds in a context of its own, made now if it has none (llama_embed.py)."""
        llama = self._require_model()
        if not request.inputs:
            raise BackendError("bad_request", "There are no inputs to embed.")
        embedder = self._embedder or self._side_embedder(llama)
        name = self._info.name if self._info else "The model"
        if embedder.pooling == POOLING_RANK:
            raise BackendError("bad_request", f"{name} is a reranker: it scores pairs of texts and makes no "
                                              "embeddings.")
        # An input fits one ubatch (pooled whole), and no further than the positions the model learned.
        limit = min(embedder.n_ubatch, llama.n_ctx_train or embedder.n_ubatch)
        tokens = input_tokens(request.inputs, lambda text: llama.tokenize(text.encode("utf-8"), True, False),
                              llama.n_vocab, limit, name, request.truncate)
        return GgufEmbedJob(request, tokens, embedder)

    def _side_embedder(self, llama: LlamaHandle) -> LlamaEmbedder:
        """A chat model's context for embeddings, beside its chat context: one ubatch of the chat's size."""
        try:
            with self._logs.separate_buffers() as buffers:
                embedder = LlamaEmbedder.beside(llama, llama.n_batch, self._pooling)
        except LlamaError as exc:
            detail = "; ".join(self._logs.recent_errors) or str(exc)
            raise BackendError("internal", f"The model cannot embed: llama.cpp made no context for it ({detail}).") from None
        self._embedder, self._embed_buffers = embedder, buffers
        return embedder

    def _require_model(self) -> LlamaHandle:
        if self._llama is None:
            raise BackendError("no_model", "No model is loaded.")
        return self._llama

    def _prompt_tokens(self, request: GenerateRequest, shaped: ShapedPrompt | None) -> list[int]:
        if shaped is not None:
            return self._tokenize(shaped.text)
        if request.prompt is not None:  # a raw completion: no chat template
            raw = self._llama.tokenize(request.prompt.encode("utf-8"), add_bos=self._add_bos, special=True)
            if not raw:
                raise BackendError("bad_request", "The prompt is empty.")
            return raw
        raise AssertionError("a chat request is shaped")

    def _tokenize(self, prompt: str) -> list[int]:
        """Tokens of a rendered prompt; BOS is added unless the template wrote it already."""
        return self._llama.tokenize(prompt.encode("utf-8"), add_bos=self._adds_bos(prompt), special=True)

    def _adds_bos(self, prompt: str) -> bool:
        """Whether BOS goes before a rendered prompt: where the model wants one and the template has not written it."""
        return self._add_bos and not (self._bos_text and prompt.startswith(self._bos_text))

    # ------------------------------------------------------------ memory

    def memory(self) -> MemoryReport:
        """llama.cpp's buffers per device, KV cells in use, the prefix cache and the rest (memory_report.py)."""
        if self._meter is None:
            self._meter = DeviceMeter()
        return gguf_memory_report(self.memory_figures(), self._meter)

    def memory_figures(self) -> GgufMemoryFigures:
        """What this backend holds, for the memory report: llama.cpp's logged buffers, the KV cells in use,
        the prefix cache's tiers."""
        ram = self._cache.total_bytes
        disk = self._store.total_bytes if self._store is not None else 0
        if self._llama is None or self._prefixes is None:
            return GgufMemoryFigures(None, prefix_ram_bytes=ram, prefix_disk_bytes=disk)
        # Exact: the ledger knows which cells sequences share (a state restored from RAM beside a
        # pinned prompt holds the same first tokens in cells of its own).
        seqs = self._prefixes.seqs
        return GgufMemoryFigures(_with_compute(self._logs.buffers, self._embed_buffers), seqs.used_cells(),
                                 self._llama.n_ctx, ram, disk,
                                 dict(self._gpu_names), self._draft_buffers,
                                 tuple(n for n in seqs.slot_tokens() if n), seqs.slots, self._projector_buffers)


def _with_compute(buffers: BufferSizes, extra: BufferSizes | None) -> BufferSizes:
    """The model's buffers with every buffer of `extra` (a chat model's embedding context) counted as compute."""
    if extra is None:
        return buffers
    merged = BufferSizes({kind: dict(per_backend) for kind, per_backend in buffers.by_kind.items()})
    for per_backend in extra.by_kind.values():
        for backend, nbytes in per_backend.items():
            merged.add("compute", backend, nbytes)
    return merged


def _with_markers(message: ChatMessage) -> ChatMessage:
    """The message as the template renders it: one marker per media before its text (where libmtmd puts each
    media's chunk); a message without media as it is."""
    if not message.media:
        return message
    markers = "".join(MEDIA_MARKER + "\n" for _ in message.media)
    return ChatMessage(message.role, markers + message.content, message.tool_calls, message.tool_call_id,
                       message.name)


def _token_text(llama: LlamaHandle, token: int) -> str:
    if token < 0:
        return ""
    return llama.detokenize([token], special=True).decode("utf-8", errors="replace")

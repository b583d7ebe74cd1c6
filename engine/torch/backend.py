"""The PyTorch backend: a Hugging Face model folder (dense or AWQ safetensors) behind the engine host.

It renders the chat template in the same sandbox as the GGUF backend, tokenizes with the
`tokenizers` package, and runs requests through LLMEngine (paged KV cache with prefix caching,
so the next turn of a conversation prefills only what is new). A greedy request may be
decoded speculatively (prompt lookup or a draft model), which leaves its output unchanged.
Loading is session.py; what a reply looks like to the user is engine/reply/stream.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from engine.backend import BackendError
from engine.device_memory import DeviceMeter
from engine.load_watch import ProgressFn
from engine.openmp_policy import ThreadGovernor
from engine.protocol import (
    Done,
    FinishReason,
    GenerateRequest,
    LoadRequest,
    MemoryReport,
    ModelInfo,
    SamplingParams,
)
from engine.reply.shape import ShapedPrompt, shape_prompt
from engine.reply.stream import ReplyStream, check_fits
from engine.torch.hf_tokenizer import IncrementalDecoder
from engine.torch.kv_pool import BLOCK_SIZE
from engine.torch.load_settings import DEFAULT_SPECULATIVE_TOKENS
from engine.torch.memory_report import EMPTY, TorchMemory, measure, report
from engine.torch.sequence import SamplingOptions
from engine.torch.session import TorchSession, open_session

log = logging.getLogger(__name__)

# Prompt-lookup drafts per decode step on the CPU, where verifying 5 tokens costs about what 1 does
# (the weights are read once either way); on CUDA, decode runs in CUDA graphs instead.
CPU_SPECULATIVE_TOKENS = DEFAULT_SPECULATIVE_TOKENS


class TorchBackend:
    def __init__(self, device: str | None = None, speculative_tokens: int | None = None,
                 progress: ProgressFn | None = None):
        """`speculative_tokens`: prompt-lookup drafts per step when a load asks for "auto" speculation
        (default: CPU_SPECULATIVE_TOKENS on the CPU, none on a GPU). `progress`: hears how far each load
        got, per layer; its False cancels the load (engine/load_watch.py)."""
        self._progress = progress
        self._device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if speculative_tokens is None:
            speculative_tokens = CPU_SPECULATIVE_TOKENS if self._device.type == "cpu" else 0
        self._speculative_tokens = speculative_tokens
        self._meter = DeviceMeter()
        self._session: TorchSession | None = None
        self._governor: ThreadGovernor | None = None
        # Share of speculative drafts the model accepted in the latest reply (None: no drafts).
        self.last_acceptance_rate: float | None = None

    @property
    def session(self) -> TorchSession | None:
        """The loaded model and its engine; None before a load."""
        return self._session

    def load(self, request: LoadRequest) -> ModelInfo:
        self.close()
        self._session = open_session(request, self._device, self._speculative_tokens, self._progress)
        if self._device.type == "cpu":  # the threads the session runs on, fewer while other programs are busy
            self._governor = ThreadGovernor(torch.get_num_threads(), torch.set_num_threads, time.monotonic())
        return self._session.info

    def close(self) -> None:
        self._session = None
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    def generate(
        self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]
    ) -> Done:
        session = self._session
        if session is None:
            raise BackendError("no_model", "No model is loaded.")
        engine, spec = session.engine, session.spec
        t_start = time.perf_counter()
        shaped = self._shaped(session, request)
        tokens = self._prompt_tokens(session, request, shaped)
        check_fits(len(tokens), engine.config.max_model_len)
        seq_id = engine.add_request(tokens, sampling_options(request.sampling))
        proposed0, accepted0 = (spec.proposed, spec.accepted) if spec is not None else (0, 0)
        reply = ReplyStream(request, len(tokens), emit, t_start, shaped)
        decoder = IncrementalDecoder(session.tokenizer)
        finish: FinishReason = "length"
        cached: int | None = None
        done = False
        governor = self._governor
        while not done:
            if governor is not None:
                governor.look(time.monotonic())
            if cancelled():
                engine.abort(seq_id)
                finish = "cancelled"
                break
            for out in engine.step():
                if out.seq_id != seq_id:
                    continue
                if out.finish_reason == "error":
                    raise BackendError("context_overflow", out.error or "the request could not run")
                if cached is None:
                    seq = engine.get_sequence(seq_id)
                    cached = seq.num_cached_tokens if seq is not None else 0
                reply.token()
                if out.token_id is not None and not (out.finished and out.token_id in engine.config.eos_token_ids):
                    reply.add(decoder.feed(out.token_id))
                if out.finished:
                    finish = "stop" if out.finish_reason == "stop" else "length"
                    done = True
                elif reply.stopped:
                    engine.abort(seq_id)
                    finish, done = "stop", True
                if done:
                    break
        while engine.has_unfinished():  # report the abort, free its blocks
            engine.step()
        proposed = spec.proposed - proposed0 if spec is not None else 0
        self.last_acceptance_rate = (spec.accepted - accepted0) / proposed if spec is not None and proposed else None
        if self.last_acceptance_rate is not None:
            log.info("reply %d: %d drafts, %.0f%% accepted", request.request_id, proposed, 100 * self.last_acceptance_rate)
        return reply.done(finish, cached or 0, decoder.flush(), self.last_acceptance_rate)

    @staticmethod
    def _shaped(session: TorchSession, request: GenerateRequest) -> ShapedPrompt | None:
        """The chat rendered for its shape; what this engine cannot do is refused by name."""
        if request.prompt is not None:
            return None
        tokenizer = session.tokenizer
        shaped = shape_prompt(tokenizer.template, tokenizer.template_error, list(request.messages), request.shape,
                              tokenizer.formats)
        if shaped.grammar is not None:
            raise BackendError("bad_request", "The PyTorch engine cannot constrain its output to a JSON schema or "
                                              "to tool calls; load the model as a GGUF file for that.")
        if shaped.think_budget is not None and shaped.reasoning is not None:
            raise BackendError("bad_request", "The PyTorch engine has no thinking budget (and cannot switch this "
                                              "model's reasoning off); load the model as a GGUF file for that.")
        return shaped

    @staticmethod
    def _prompt_tokens(session: TorchSession, request: GenerateRequest, shaped: ShapedPrompt | None) -> list[int]:
        tokenizer = session.tokenizer
        text = shaped.text if shaped is not None else request.prompt or ""  # a raw completion: no chat template
        tokens = tokenizer.encode(text)
        if not tokens:
            raise BackendError("bad_request", "The prompt is empty.")
        return tokens

    def details(self) -> TorchMemory:
        s = self._session
        return EMPTY if s is None else measure(s.engine, s.model, s.kv, s.runner)

    def memory(self) -> MemoryReport:
        return report(self.details(), self._device, BLOCK_SIZE, self._meter)


def sampling_options(s: SamplingParams) -> SamplingOptions:
    """The engine's options for a request's sampling; out-of-range values are clamped."""
    try:
        return SamplingOptions(
            temperature=max(0.0, s.temperature),
            top_p=s.top_p if 0.0 < s.top_p <= 1.0 else 1.0,
            top_k=max(0, s.top_k),
            max_tokens=max(1, s.max_tokens),
            seed=s.seed,
        )
    except ValueError as exc:
        raise BackendError("bad_request", str(exc)) from None

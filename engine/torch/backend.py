"""The PyTorch backend: a Hugging Face model folder (dense or AWQ safetensors) behind the engine host.

It renders the chat template in the same sandbox as the GGUF backend, tokenizes with the
`tokenizers` package, and runs replies through LLMEngine (paged KV cache with prefix caching,
so the next turn of a conversation prefills only what is new). Up to the load's n_parallel replies
run at once, continuously batched: a reply joins at the next step and leaves when it ends, each
streaming its own text (running_reply.py). A greedy reply may be decoded speculatively (prompt lookup
or a draft model), which leaves its output unchanged; drafts are verified per sequence inside the
batch, so speculation runs beside other replies too. Loading is session.py; what a reply looks like
to the user is engine/reply/stream.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NoReturn

import torch

from engine.backend import BackendError, run_alone
from engine.device_memory import DeviceMeter
from engine.load_watch import ProgressFn
from engine.openmp_policy import ThreadGovernor
from engine.protocol import (
    ChatMessage,
    CountTokensRequest,
    Done,
    EmbedRequest,
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
from engine.torch.llm_engine import LLMEngine
from engine.torch.load_settings import DEFAULT_SPECULATIVE_TOKENS
from engine.torch.memory_report import EMPTY, TorchMemory, measure, report
from engine.torch.running_reply import RunningReply
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
        self._replies: dict[int, RunningReply] = {}  # the replies running, by engine sequence id
        # Share of speculative drafts the model accepted in the latest reply that ended (None: no drafts).
        self.last_acceptance_rate: float | None = None

    @property
    def session(self) -> TorchSession | None:
        """The loaded model and its engine; None before a load."""
        return self._session

    def load(self, request: LoadRequest) -> ModelInfo:
        if request.mmproj:
            raise BackendError("bad_request", "A projector (mmproj) is for GGUF models; the PyTorch engine takes "
                                              "text only.")
        self.close()
        self._session = open_session(request, self._device, self._speculative_tokens, self._progress)
        if self._device.type == "cpu":  # the threads the session runs on, fewer while other programs are busy
            self._governor = ThreadGovernor(torch.get_num_threads(), torch.set_num_threads, time.monotonic())
        return self._session.info

    def close(self) -> None:
        self._session = None
        self._replies.clear()
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    # ------------------------------------------------------------ replies

    @property
    def free_slots(self) -> int:
        """How many more replies can start now: the load's n_parallel, less those running."""
        s = self._session
        return 0 if s is None else s.engine.config.max_num_seqs - len(self._replies)

    def submit(self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]) -> None:
        """Start a reply beside those running; it joins the engine's batch at the next step. BackendError when
        it cannot run (no model, no template, a shape this engine cannot give, too long, every slot taken)."""
        session = self._session
        if session is None:
            raise BackendError("no_model", "No model is loaded.")
        if self.free_slots <= 0:
            raise BackendError("busy", f"All {session.engine.config.max_num_seqs} reply slots are in use.")
        _refuse_media(request.messages)
        engine = session.engine
        t_start = time.perf_counter()
        shaped = self._shaped(session, request)
        tokens = self._prompt_tokens(session, request, shaped)
        check_fits(len(tokens), engine.config.max_model_len)
        seq_id = engine.add_request(tokens, sampling_options(request.sampling))
        seq = engine.get_sequence(seq_id)
        assert seq is not None  # live, or ended at once (a prompt the KV pool cannot hold): the next step says
        self._replies[seq_id] = RunningReply(
            request, seq, ReplyStream(request, len(tokens), emit, t_start, shaped),
            IncrementalDecoder(session.tokenizer), cancelled, speculative=session.spec is not None,
        )

    def count_tokens(self, request: CountTokensRequest) -> int:
        """The tokens `submit` would prefill for these messages (refused as it would refuse them), nothing decoded."""
        session = self._session
        if session is None:
            raise BackendError("no_model", "No model is loaded.")
        _refuse_media(request.messages)
        as_reply = GenerateRequest(request.request_id, request.messages, shape=request.shape)
        return len(self._prompt_tokens(session, as_reply, self._shaped(session, as_reply)))

    def embed(self, request: EmbedRequest) -> NoReturn:
        """The PyTorch engine makes no embeddings: a bad_request saying where to get them."""
        raise BackendError("bad_request", "The PyTorch engine makes no embeddings: load a GGUF model to embed "
                                          "(an embedding model such as nomic-embed-text, or any chat model).")

    def step(self) -> list[tuple[int, Done | BackendError]]:
        """One engine step of every running reply (up to n_parallel sequences decoded together, prompts
        prefilled in chunks beside them); (request id, Done or BackendError) of those that ended."""
        session = self._session
        if session is None or not self._replies:
            return []
        if self._governor is not None:
            self._governor.look(time.monotonic())
        engine = session.engine
        ended: list[RunningReply] = []
        for seq_id, reply in list(self._replies.items()):
            if reply.cancelled():
                engine.abort(seq_id)
                ended.append(self._end(seq_id, "cancelled"))
        if self._replies:
            try:
                outputs = engine.step()
            except Exception as exc:  # noqa: BLE001 - a failed step ends its replies, not the engine process
                log.exception("an engine step failed")
                return self._outcomes(ended + self._fail_all(engine, exc))
            eos = engine.config.eos_token_ids
            for out in outputs:
                reply = self._replies.get(out.seq_id)
                if reply is None:
                    continue  # ended already: an abort reported, or tokens past its stop string
                ending = reply.take(out, eos)
                if ending is None:
                    continue
                if not out.finished:
                    engine.abort(out.seq_id)  # a stop string: the sequence would go on
                ended.append(self._end(out.seq_id, ending))
        if not self._replies:
            while engine.has_unfinished():  # report the aborts (their blocks are free already)
                engine.step()
        return self._outcomes(ended)

    def idle(self, interrupted: Callable[[], bool] = lambda: False) -> int:
        """Nothing to warm between requests: a finished reply's blocks stay in the prefix cache as they are."""
        return 0

    def generate(
        self, request: GenerateRequest, emit: Callable[[str], None], cancelled: Callable[[], bool]
    ) -> Done:
        """One reply from start to end (steps every reply running beside it too): engine/backend.py's run_alone."""
        return run_alone(self, request, emit, cancelled)

    def _end(self, seq_id: int, ending: FinishReason | BackendError) -> RunningReply:
        reply = self._replies.pop(seq_id)
        reply.finish(ending)
        if isinstance(reply.outcome, Done):
            self.last_acceptance_rate = reply.acceptance
            if reply.acceptance is not None:
                log.info("reply %d: %d drafts, %.0f%% accepted", reply.request.request_id,
                         reply.seq.num_drafts_proposed, 100 * reply.acceptance)
        return reply

    def _fail_all(self, engine: LLMEngine, exc: Exception) -> list[RunningReply]:
        """End every running reply with an internal error; their sequences are aborted (blocks freed)."""
        error = BackendError("internal", f"The PyTorch engine failed a step: {type(exc).__name__}: {exc}")
        ended = []
        for seq_id in list(self._replies):
            engine.abort(seq_id)
            ended.append(self._end(seq_id, error))
        return ended

    @staticmethod
    def _outcomes(ended: list[RunningReply]) -> list[tuple[int, Done | BackendError]]:
        return [(r.request.request_id, r.outcome) for r in ended if r.outcome is not None]

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


def _refuse_media(messages: tuple[ChatMessage, ...]) -> None:
    if any(m.media for m in messages):
        raise BackendError("bad_request", "The PyTorch engine takes no images or audio: load a GGUF model "
                                          "with its projector (mmproj) for that.")


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

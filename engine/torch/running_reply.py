"""One reply running in the PyTorch engine: its sequence, its text on the way out, and how it ends.

TorchBackend (backend.py) steps LLMEngine for every running reply at once and hands each reply the
outputs of its own sequence; what the user sees of them (stop strings, reasoning, stats) is
engine/reply/stream.py, as for the GGUF backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.backend import BackendError
from engine.protocol import Done, FinishReason, GenerateRequest
from engine.reply.stream import ReplyStream
from engine.torch.hf_tokenizer import IncrementalDecoder
from engine.torch.llm_engine import StepOutput
from engine.torch.sequence import Sequence


@dataclass(eq=False)
class RunningReply:
    """A reply and the engine sequence that computes it."""

    request: GenerateRequest
    seq: Sequence
    stream: ReplyStream
    decoder: IncrementalDecoder
    cancelled: Callable[[], bool]
    speculative: bool  # the engine drafts (its acceptance rate goes into the Done)
    cached: int | None = None  # prompt tokens found in the prefix cache, read at its first output
    outcome: Done | BackendError | None = None

    def take(self, out: StepOutput, eos_ids: tuple[int, ...]) -> FinishReason | BackendError | None:
        """One output of this reply's sequence: its token's text streamed. Why the reply ends here (a stop
        string ends it while its sequence still runs: the caller aborts that), or None."""
        if out.finish_reason == "error":
            return BackendError("context_overflow", out.error or "the request could not run")
        if self.cached is None:  # known once the sequence was admitted (its prefix-cache hit counted)
            self.cached = self.seq.num_cached_tokens
        self.stream.token()
        if out.token_id is not None and not (out.finished and out.token_id in eos_ids):
            self.stream.add(self.decoder.feed(out.token_id))
        if out.finished:
            return "stop" if out.finish_reason == "stop" else "length"
        return "stop" if self.stream.stopped else None

    @property
    def acceptance(self) -> float | None:
        """The share of this reply's drafts the model kept; None without drafts."""
        proposed = self.seq.num_drafts_proposed
        return self.seq.num_drafts_accepted / proposed if self.speculative and proposed else None

    def finish(self, ending: FinishReason | BackendError) -> Done | BackendError:
        """End the reply: its Done (the decoder's last text with it), or the error."""
        if isinstance(ending, BackendError):
            self.outcome = ending
        else:
            self.outcome = self.stream.done(ending, self.cached or 0, self.decoder.flush(), self.acceptance)
        return self.outcome

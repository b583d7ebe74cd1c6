"""The engine loop: requests in, one scheduled batch per step through a Runner, tokens out.

The runner (torch side: model_runner.py) computes the chunks of a batch over the paged KV cache and
samples; everything here is plain Python.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass
from typing import Protocol

from engine.torch.block_manager import BlockManager
from engine.torch.config import EngineConfig
from engine.torch.scheduler import ScheduledBatch, Scheduler
from engine.torch.sequence import SamplingOptions, Sequence


class Runner(Protocol):
    def run(self, batch: ScheduledBatch) -> list[int | None]:
        """Compute the chunks of `batch` and sample one token for each chunk that ends its sequence.

        K/V of position p of a sequence go to slot block_table[p // block_size] * block_size
        + p % block_size; result i belongs to batch.chunks[i] and is None for a chunk that stops
        mid-prompt. A speculative runner may return a list of accepted tokens for a decode chunk.
        """
        ...


@dataclass(frozen=True, slots=True)
class StepOutput:
    """One event of a request: a new token, its end, or both.

    token_id is None for an end without a token (abort, error); error says why for finish_reason "error".
    """

    seq_id: int
    token_id: int | None
    finished: bool
    finish_reason: str | None
    error: str | None = None


class LLMEngine:
    """Continuous batching: requests join between steps and leave as soon as they finish."""

    def __init__(self, config: EngineConfig, runner: Runner):
        self.config = config
        self.runner = runner
        self.block_manager = BlockManager(config.num_kv_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(config, self.block_manager)
        self._ids = itertools.count()
        self._live: dict[int, Sequence] = {}
        self._recently_finished: dict[int, Sequence] = {}
        self._pending: list[StepOutput] = []  # ends decided between steps, reported by the next step
        # The sequences the latest step computed, in batch order: which requests were batched together.
        self.last_batch: tuple[int, ...] = ()

    def add_request(self, prompt_ids: SequenceOf[int], sampling: SamplingOptions | None = None) -> int:
        """Queue a request and return its id. A prompt that cannot run (empty, longer than the
        context or the KV pool) ends at the next step with finish_reason "error"; others go on."""
        seq = Sequence(next(self._ids), list(prompt_ids), sampling)
        self.scheduler.add(seq)
        if seq.is_finished:
            self._pending.append(StepOutput(seq.seq_id, None, True, seq.finish_reason, seq.error))
            self._recently_finished[seq.seq_id] = seq
        else:
            self._live[seq.seq_id] = seq
        return seq.seq_id

    def abort(self, seq_id: int) -> bool:
        """Stop a request; the next step reports its end (finish_reason "abort"). False if unknown."""
        seq = self.scheduler.abort(seq_id)
        if seq is None:
            return False
        del self._live[seq_id]
        self._recently_finished[seq_id] = seq
        self._pending.append(StepOutput(seq_id, None, True, "abort"))
        return True

    def has_unfinished(self) -> bool:
        return bool(self._live) or bool(self._pending)

    def get_sequence(self, seq_id: int) -> Sequence | None:
        """A request still running, or one that ended in the latest step (for its stats)."""
        return self._live.get(seq_id) or self._recently_finished.get(seq_id)

    def step(self) -> list[StepOutput]:
        """Run one batch; return the events of this step in batch order (ends decided between steps
        first)."""
        outputs, self._pending = self._pending, []
        self._recently_finished = {o.seq_id: self._recently_finished[o.seq_id] for o in outputs}
        batch = self.scheduler.schedule()
        self.last_batch = tuple(c.seq.seq_id for c in batch.chunks)
        for seq in batch.finished:
            outputs.append(StepOutput(seq.seq_id, None, True, seq.finish_reason, seq.error))
            self._retire(seq)
        if not batch.chunks:
            if not outputs and not self.scheduler.is_finished():
                # Every waiting or running sequence always has work; this would spin forever.
                raise RuntimeError("the scheduler stalled: unfinished requests but nothing to run")
            return outputs
        # Note how long each sequence was before the step, to report every token it gained.
        lengths = [c.seq.num_tokens for c in batch.chunks]
        sampled = self.runner.run(batch)
        self.scheduler.postprocess(batch, sampled)
        for chunk, before in zip(batch.chunks, lengths, strict=True):
            seq = chunk.seq
            new_tokens = seq.token_ids[before:]
            for k, token in enumerate(new_tokens):
                last = k == len(new_tokens) - 1
                ended = last and seq.is_finished
                outputs.append(StepOutput(seq.seq_id, token, ended, seq.finish_reason if ended else None))
            if seq.is_finished and seq.seq_id in self._live:
                self._retire(seq)
        return outputs

    def generate(
        self, prompts: list[list[int]], sampling: SamplingOptions | list[SamplingOptions] | None = None
    ) -> list[list[int]]:
        """Run `prompts` to completion together and return each completion's tokens, in order.

        Raises ValueError (before anything runs) for a prompt that cannot run.
        """
        samplings = sampling if isinstance(sampling, list) else [sampling] * len(prompts)
        if len(samplings) != len(prompts):
            raise ValueError(f"{len(samplings)} sampling options for {len(prompts)} prompts")
        for i, prompt in enumerate(prompts):
            error = self.scheduler.prompt_error(len(prompt))
            if error is not None:
                raise ValueError(f"prompt {i}: {error}")
        ids = [self.add_request(p, s) for p, s in zip(prompts, samplings, strict=True)]
        seqs = [self._live[i] for i in ids]
        while any(not s.is_finished for s in seqs):
            self.step()
        return [s.completion_token_ids for s in seqs]

    def _retire(self, seq: Sequence) -> None:
        self._live.pop(seq.seq_id, None)
        self._recently_finished[seq.seq_id] = seq

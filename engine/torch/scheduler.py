"""Continuous batching with chunked prefill under a token budget, and preemption when KV blocks run out.

Each step the scheduler fills one batch, in this order:
  1. decodes: every running sequence whose K/V are computed up to its last token gets one position
     (its newest token), taking a new block when that token starts one; when none is free, the most
     recently admitted running sequences are preempted (blocks released, back to the front of the queue);
  2. prefill chunks of running sequences admitted earlier whose prompts are not computed yet;
  3. new (or preempted) sequences from the waiting queue, while their blocks can be had, the budget lasts
     and fewer than max_num_seqs run; their first chunk starts after any prefix-cache hit.
A prompt longer than the budget is thus spread over several steps while other sequences keep decoding.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.torch.block_manager import BlockManager
from engine.torch.config import EngineConfig
from engine.torch.sequence import Sequence, SequenceStatus


@dataclass(slots=True)
class ScheduledChunk:
    """Compute K/V (and the logits of the last position) for positions [start, end) of `seq`.

    `lookahead` (decode chunks, speculative runners only) is how many draft positions past `end`
    have KV slots in the block table and budget in this step.
    """

    seq: Sequence
    start: int
    end: int
    lookahead: int = 0

    @property
    def num_tokens(self) -> int:
        return self.end - self.start

    @property
    def is_last(self) -> bool:
        """Whether this chunk reaches the end of the sequence, so a token is sampled from it."""
        return self.end == self.seq.num_tokens


@dataclass(slots=True)
class ScheduledBatch:
    """One step's work; decodes come first, then prefill chunks. `finished` lists sequences the
    scheduler ended while scheduling (a sequence the whole KV pool cannot hold)."""

    chunks: list[ScheduledChunk]
    finished: list[Sequence] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(c.end - c.start for c in self.chunks)


class Scheduler:
    """Decides what the runner computes each step and applies what it sampled."""

    def __init__(self, config: EngineConfig, block_manager: BlockManager):
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # in order of admission: the tail is preempted first
        self.num_preemptions = 0

    # ----- requests

    def add(self, seq: Sequence) -> None:
        """Queue `seq`; a prompt that can never run finishes at once with finish_reason "error"."""
        error = self.prompt_error(seq.num_prompt_tokens)
        if error is not None:
            seq.error = error
            seq.status = SequenceStatus.FINISHED
            seq.finish_reason = "error"
            return
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def abort(self, seq_id: int) -> Sequence | None:
        """End a waiting or running sequence (finish_reason "abort"); None when it is not here."""
        for seq in self.waiting:
            if seq.seq_id == seq_id:
                self.waiting.remove(seq)
                self._finish(seq, "abort")
                return seq
        for seq in self.running:
            if seq.seq_id == seq_id:
                self._finish(seq, "abort")
                return seq
        return None

    def is_finished(self) -> bool:
        return not self.waiting and not self.running

    # ----- one step

    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch([])
        budget = self.config.max_num_batched_tokens
        lookahead = self.config.num_speculative_tokens
        preempted: list[Sequence] = []

        # 1. decodes, oldest first
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            if seq.num_tokens - seq.num_computed_tokens != 1:
                i += 1
                continue
            # Draft slots cost budget too; with the budget >= max_num_seqs every decode still fits.
            drafts = min(lookahead, budget - (len(self.running) - i))
            used = self._make_room(seq, i, max(0, drafts), preempted, batch)
            if used is None:
                continue  # seq itself left `running`; the next one moved into slot i
            batch.chunks.append(ScheduledChunk(seq, seq.num_tokens - 1, seq.num_tokens, used))
            budget -= 1 + used
            i += 1

        # 2. prefill chunks of sequences already running (their blocks were allocated at admission)
        for seq in self.running:
            if budget <= 0:
                break
            remaining = seq.num_tokens - seq.num_computed_tokens
            if remaining > 1:
                n = min(remaining, budget)
                batch.chunks.append(ScheduledChunk(seq, seq.num_computed_tokens, seq.num_computed_tokens + n))
                budget -= n

        # 3. admit waiting sequences (not those preempted a moment ago: they wait for freed blocks)
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            if any(seq is p for p in preempted):
                break
            if not self.block_manager.can_allocate(seq):
                if not self.running and seq.num_blocks(self.block_manager.block_size) > self.block_manager.num_blocks:
                    self.waiting.popleft()
                    self._finish(seq, "length")
                    batch.finished.append(seq)
                    continue
                break
            self.waiting.popleft()
            self.block_manager.allocate(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            n = min(seq.num_tokens - seq.num_computed_tokens, budget)
            batch.chunks.append(ScheduledChunk(seq, seq.num_computed_tokens, seq.num_computed_tokens + n))
            budget -= n
        return batch

    def postprocess(self, batch: ScheduledBatch, sampled: list[int | list[int] | None]) -> list[Sequence]:
        """Record what the runner computed and sampled; return the sequences that finished.

        sampled[i] belongs to batch.chunks[i]: None for a chunk that stops mid-prompt, the sampled token
        for a chunk that reaches the end of its sequence, or (speculative runners) the list of tokens
        accepted for a decode chunk, whose drafts' K/V the runner wrote in the lookahead slots.
        """
        if len(sampled) != len(batch.chunks):
            raise ValueError(f"runner returned {len(sampled)} results for {len(batch.chunks)} chunks")
        finished: list[Sequence] = []
        for chunk, result in zip(batch.chunks, sampled, strict=True):
            seq = chunk.seq
            if seq.status is not SequenceStatus.RUNNING or seq.num_computed_tokens != chunk.start:
                continue  # aborted or preempted since it was scheduled
            if chunk.end < seq.num_tokens:
                seq.num_computed_tokens = chunk.end
                self.block_manager.register_computed(seq)
                continue
            if result is None:
                raise ValueError(f"runner sampled no token for sequence {seq.seq_id} at its last position")
            tokens = result if isinstance(result, list) else [result]
            if not 1 <= len(tokens) <= chunk.lookahead + 1:
                raise ValueError(
                    f"runner returned {len(tokens)} tokens for sequence {seq.seq_id}; "
                    f"its chunk had room for {chunk.lookahead} drafts"
                )
            reason = None
            for token in tokens:
                seq.append_token(token)
                reason = self._stop_reason(seq, token)
                if reason is not None:
                    break
            # Drafts accepted before the newest token were computed by the verifying pass.
            seq.num_computed_tokens = seq.num_tokens - 1
            # Register before finishing too, so the next turn of a chat finds this reply's blocks.
            self.block_manager.register_computed(seq)
            if reason is not None:
                self._finish(seq, reason)
                finished.append(seq)
        return finished

    def prompt_error(self, num_prompt_tokens: int) -> str | None:
        """Why a prompt of this length can never run here, or None when it can."""
        cfg = self.config
        if num_prompt_tokens == 0:
            return "the prompt is empty"
        if num_prompt_tokens >= cfg.max_model_len:
            return (
                f"the prompt has {num_prompt_tokens} tokens; the context holds {cfg.max_model_len}, "
                "which leaves no room for a reply"
            )
        capacity = self.block_manager.num_blocks * self.block_manager.block_size
        if num_prompt_tokens >= capacity:
            return (
                f"the prompt has {num_prompt_tokens} tokens; the KV cache holds only {capacity} "
                "(give the engine more memory or use a shorter prompt)"
            )
        return None

    # ----- internals

    def _stop_reason(self, seq: Sequence, token: int) -> str | None:
        sampling = seq.sampling
        if token in sampling.stop_token_ids or (not sampling.ignore_eos and token in self.config.eos_token_ids):
            return "stop"
        if seq.num_completion_tokens >= sampling.max_tokens or seq.num_tokens >= self.config.max_model_len:
            return "length"
        return None

    def _make_room(
        self, seq: Sequence, index: int, lookahead: int, preempted: list[Sequence], batch: ScheduledBatch
    ) -> int | None:
        """Get the blocks `seq` needs to decode, preempting sequences admitted after it. Returns how many
        draft slots it got, or None when `seq` had to leave `running` itself."""
        bm = self.block_manager
        # Draft slots are a bonus: never past the context, and never worth preempting anyone for.
        lookahead = max(0, min(lookahead, self.config.max_model_len - seq.num_tokens))
        if not bm.can_append(seq, lookahead):
            lookahead = 0
        while not bm.can_append(seq):
            if len(self.running) > index + 1:
                victim = self.running[-1]
            elif index > 0:
                victim = seq  # only sequences already scheduled this step are left: wait for them
            else:
                # Alone and still short: the whole pool cannot hold this sequence any longer.
                self._finish(seq, "length")
                batch.finished.append(seq)
                return None
            self._preempt(victim)
            preempted.append(victim)
            if victim is seq:
                return None
        bm.may_append(seq, lookahead)
        return lookahead

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.deallocate(seq)
        self.running.remove(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def _finish(self, seq: Sequence, reason: str) -> None:
        if seq.block_table:
            self.block_manager.deallocate(seq)
        if seq in self.running:
            self.running.remove(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason

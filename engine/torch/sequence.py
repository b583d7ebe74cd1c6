"""One request as the scheduler sees it: its tokens, its KV blocks and how far its K/V are computed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class SequenceStatus(Enum):
    WAITING = "waiting"  # queued, holds no KV blocks (new, or preempted)
    RUNNING = "running"  # holds KV blocks for all its tokens; prefilling or decoding
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class SamplingOptions:
    """How the runner picks the next token of one request, and when the request stops.

    temperature 0 is greedy; top_k 0 and top_p 1.0 switch those filters off; seed makes sampling
    reproducible per request.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


class Sequence:
    """A prompt and its completion so far.

    Invariants while RUNNING: `block_table` covers positions [0, num_tokens) (decoding sequences may
    hold extra slots for speculative drafts), and the K/V of positions [0, num_computed_tokens) are in
    those blocks. The runner computes what lies between, chunk by chunk.
    """

    __slots__ = (
        "seq_id",
        "token_ids",
        "num_prompt_tokens",
        "num_computed_tokens",
        "num_cached_tokens",
        "block_table",
        "status",
        "sampling",
        "finish_reason",
        "error",
        "num_preemptions",
        "block_hashes",
        "num_registered_blocks",
        "num_drafts_proposed",
        "num_drafts_accepted",
    )

    def __init__(self, seq_id: int, prompt_token_ids: list[int], sampling: SamplingOptions | None = None):
        self.seq_id = seq_id
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.token_ids)
        self.num_computed_tokens = 0
        self.num_cached_tokens = 0
        self.block_table: list[int] = []
        self.status = SequenceStatus.WAITING
        self.sampling = sampling if sampling is not None else SamplingOptions()
        self.finish_reason: str | None = None  # "stop", "length", "abort" or "error"
        self.error: str | None = None  # why, when finish_reason is "error"
        self.num_preemptions = 0
        # Owned by the block manager: chained hashes of the full blocks (a pure function of the tokens,
        # so kept across preemption) and how many leading blocks of block_table it has registered.
        self.block_hashes: list[int] = []
        self.num_registered_blocks = 0
        # Speculative decoding's drafts for this sequence and how many the target kept (a reply's own
        # acceptance rate, whatever ran beside it).
        self.num_drafts_proposed = 0
        self.num_drafts_accepted = 0

    def __repr__(self) -> str:
        return (
            f"Sequence(id={self.seq_id}, {self.status.value}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens}, blocks={len(self.block_table)})"
        )

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_completion_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def num_blocks(self, block_size: int) -> int:
        """Blocks needed to hold the K/V of all current tokens."""
        return -(-len(self.token_ids) // block_size)

    def block_token_ids(self, i: int, block_size: int) -> list[int]:
        """The tokens whose K/V live in the i-th block (fewer than block_size in the last one)."""
        return self.token_ids[i * block_size : (i + 1) * block_size]

"""The settings of one torch engine instance (plain data, no torch)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How big the KV pool is and how the scheduler fills a step.

    Attributes:
        num_kv_blocks: blocks in the paged KV pool (sized by the runner from free memory).
        block_size: token positions per KV block.
        max_num_seqs: sequences running at once (decoding or prefilling).
        max_num_batched_tokens: token budget of one step; longer prompts are prefilled in chunks.
        max_model_len: the context length: prompt plus completion never exceed it.
        eos_token_ids: tokens that end a completion (unless a request sets ignore_eos).
        enable_prefix_caching: reuse full KV blocks of earlier sequences by chained block hash.
        num_speculative_tokens: extra KV slots reserved past the last token of a decoding sequence,
            where a speculative runner writes the K/V of its draft tokens (0 = no speculation).
    """

    num_kv_blocks: int
    block_size: int = 16
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 2048
    max_model_len: int = 4096
    eos_token_ids: tuple[int, ...] = ()
    enable_prefix_caching: bool = True
    num_speculative_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("num_kv_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"EngineConfig.{name} must be a positive integer, got {value!r}")
        if self.num_speculative_tokens < 0:
            raise ValueError(
                f"EngineConfig.num_speculative_tokens must be >= 0, got {self.num_speculative_tokens}"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            # Otherwise the decodes of the last running sequences could wait forever behind the first.
            raise ValueError(
                "EngineConfig.max_num_batched_tokens must be at least max_num_seqs "
                f"({self.max_num_batched_tokens} < {self.max_num_seqs})"
            )

"""How much context a plan takes: Context: Auto's limits and the search for the largest that fits."""

from __future__ import annotations

from collections.abc import Callable

from models.plan.candidates import Candidate
from models.plan.forecast import KV_PADDING

# The fewest tokens of context a plan offers: Context: Auto falls back to it when nothing fits at more.
MIN_CONTEXT = 2048
# The most Context: Auto takes unless raised: past it the KV cache holds room few chats use, and a
# full window takes long to prefill on a workstation.
AUTO_CONTEXT_CAP = 32768
# Context: Auto compares a repo's files at this many tokens: on a tight GPU the best level that
# holds a real conversation beats a higher one that fits 2,048 tokens (70B on a 4090: Q2_K whole
# at 3k tokens, against a partial offload with 8k and more).
AUTO_WALK_CONTEXT = 8192
# The most Context: Auto gives an embedding model, whose context is the longest input it embeds, taken in one
# batch: chunks for retrieval are a few hundred tokens, and a causal model's compute buffer holds the logits
# of every token of that batch (151,936 floats a token for Qwen3-Embedding).
EMBEDDING_CONTEXT_CAP = 8192
# Where the search for the largest context stops for a model whose header gives no trained length.
MAX_SEARCH_CONTEXT = 1 << 20


def largest_fitting_context(fits_at: Callable[[int], bool], trained: int) -> int:
    """The largest context `fits_at` accepts: `trained` (the model's trained length; 0: unknown, searched
    up to MAX_SEARCH_CONTEXT) if it fits, else the largest multiple of KV_PADDING that does, as llama.cpp
    pads its cache to one; 0 when not even KV_PADDING tokens fit.

    The memory grows with the context, so a binary search finds it in about a dozen checks.
    """
    top = trained or MAX_SEARCH_CONTEXT
    if fits_at(top):
        return top
    # Invariant: lo * KV_PADDING fits (or lo is 0); hi * KV_PADDING, at least `top`, does not.
    lo, hi = 0, -(-top // KV_PADDING)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits_at(mid * KV_PADDING):
            lo = mid
        else:
            hi = mid
    return lo * KV_PADDING


def plan_context_cap(candidates: list[Candidate]) -> int | None:
    """The shortest trained length among `candidates` (None: no header gives one).

    A plan's context stays within it: Context: Auto is capped there, and a longer context gets a note.
    """
    return min((c.shape.n_ctx_train for c in candidates if c.shape.n_ctx_train), default=None)

"""Reciprocal rank fusion: several rankings of the same chunks made one, by 1 / (k + rank) summed.

It needs no calibration between BM25 scores and vector distances (only ranks count), which is why it is
the seam for adding a vector ranking (sqlite-vec, embeddings from the loaded model) to the keyword one:
DocumentIndex.search takes that ranking, best first, and fuses it here with its own.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)

# The constant of the original paper (Cormack, Clarke and Büttcher, SIGIR 2009): it damps the weight of
# the very first ranks, so an item second in both lists beats one first in one list and absent in the other.
RRF_K = 60


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Key]], k: int = RRF_K) -> list[tuple[Key, float]]:
    """(item, fused score) for every item of `rankings` (each best first), best first; ties keep the order
    in which items first appear."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])

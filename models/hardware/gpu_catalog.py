"""Well-known NVIDIA cards: memory, compute capability, and whether they are datacenter parts.

Used to build hypothetical machines (`tailor plan --gpu-name "RTX 4090"`) and to fill in a
compute capability that a caller did not give. Data only; no detection here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that name a family or a vendor, not a model: "NVIDIA GeForce RTX 4090" is the "4090".
_FAMILY_WORDS = frozenset({"nvidia", "geforce", "rtx", "gtx", "tesla", "quadro"})
_MEMORY_TOKEN = re.compile(r"^(\d+)gb$")


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One card as sold.

    `vram_gib` is the memory on the box in GiB (for HBM parts sold in GB, the nearest figure).
    """

    name: str
    vram_gib: float
    compute_capability: tuple[int, int]
    is_datacenter: bool


def _card(name: str, vram_gib: float, cc: tuple[int, int], datacenter: bool = False) -> GpuModel:
    return GpuModel(name, vram_gib, cc, datacenter)


# When one model comes with several memory sizes, the first listed is the default.
CATALOG: tuple[GpuModel, ...] = (
    # Pascal, Turing
    _card("GTX 1080 Ti", 11, (6, 1)),
    _card("RTX 2060", 6, (7, 5)),
    _card("RTX 2070", 8, (7, 5)),
    _card("RTX 2080", 8, (7, 5)),
    _card("RTX 2080 Ti", 11, (7, 5)),
    # Ampere
    _card("RTX 3060 12GB", 12, (8, 6)),
    _card("RTX 3060 8GB", 8, (8, 6)),
    _card("RTX 3060 Ti", 8, (8, 6)),
    _card("RTX 3070", 8, (8, 6)),
    _card("RTX 3070 Ti", 8, (8, 6)),
    _card("RTX 3080 10GB", 10, (8, 6)),
    _card("RTX 3080 12GB", 12, (8, 6)),
    _card("RTX 3080 Ti", 12, (8, 6)),
    _card("RTX 3090", 24, (8, 6)),
    _card("RTX 3090 Ti", 24, (8, 6)),
    _card("RTX A4000", 16, (8, 6)),
    _card("RTX A5000", 24, (8, 6)),
    _card("RTX A6000", 48, (8, 6)),
    # Ada
    _card("RTX 4060", 8, (8, 9)),
    _card("RTX 4060 Ti 8GB", 8, (8, 9)),
    _card("RTX 4060 Ti 16GB", 16, (8, 9)),
    _card("RTX 4070", 12, (8, 9)),
    _card("RTX 4070 SUPER", 12, (8, 9)),
    _card("RTX 4070 Ti", 12, (8, 9)),
    _card("RTX 4070 Ti SUPER", 16, (8, 9)),
    _card("RTX 4080", 16, (8, 9)),
    _card("RTX 4080 SUPER", 16, (8, 9)),
    _card("RTX 4090", 24, (8, 9)),
    _card("RTX 6000 Ada", 48, (8, 9)),
    # Blackwell (consumer)
    _card("RTX 5060 Ti 16GB", 16, (12, 0)),
    _card("RTX 5060 Ti 8GB", 8, (12, 0)),
    _card("RTX 5070", 12, (12, 0)),
    _card("RTX 5070 Ti", 16, (12, 0)),
    _card("RTX 5080", 16, (12, 0)),
    _card("RTX 5090", 32, (12, 0)),
    # Datacenter
    _card("T4", 16, (7, 5), datacenter=True),
    _card("V100 32GB", 32, (7, 0), datacenter=True),
    _card("V100 16GB", 16, (7, 0), datacenter=True),
    _card("A10", 24, (8, 6), datacenter=True),
    _card("A10G", 24, (8, 6), datacenter=True),
    _card("A30", 24, (8, 0), datacenter=True),
    _card("A40", 48, (8, 6), datacenter=True),
    _card("A100 80GB", 80, (8, 0), datacenter=True),
    _card("A100 40GB", 40, (8, 0), datacenter=True),
    _card("L4", 24, (8, 9), datacenter=True),
    _card("L40S", 48, (8, 9), datacenter=True),
    _card("H100 80GB", 80, (9, 0), datacenter=True),
    _card("H100 NVL", 94, (9, 0), datacenter=True),
    _card("H200", 141, (9, 0), datacenter=True),
    _card("B200", 180, (10, 0), datacenter=True),
)


def _tokens(name: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", name.lower())


def _model_tokens(card: GpuModel) -> frozenset[str]:
    """The words that must appear in a name for it to be this card (no family or memory words)."""
    return frozenset(t for t in _tokens(card.name) if t not in _FAMILY_WORDS and not _MEMORY_TOKEN.match(t))


def _memory_gib(tokens: list[str]) -> int | None:
    for token in tokens:
        if match := _MEMORY_TOKEN.match(token):
            return int(match.group(1))
    return None


def find_gpu(name: str, vram_gib: float | None = None) -> GpuModel | None:
    """The catalog card a name refers to, or None.

    Matches NVML names ("NVIDIA GeForce RTX 4090", "NVIDIA A100-SXM4-80GB") and short ones
    ("RTX 4090", "4090", "a100"). Where several cards match, the most specific name wins
    ("RTX 4070 Ti SUPER" over "RTX 4070"); between memory sizes of one model, a size in
    the name ("80GB") or the closest to `vram_gib` decides, else the first listed.

    Args:
        name: The card's name as NVML or a person writes it.
        vram_gib: The card's memory, when known, to tell memory variants apart.

    Returns:
        The matching catalog entry, or None for a card not in the catalog.
    """
    query = _tokens(name)
    words = set(query)
    matches = [card for card in CATALOG if _model_tokens(card) and _model_tokens(card) <= words]
    if not matches:
        return None
    most = max(len(_model_tokens(card)) for card in matches)
    matches = [card for card in matches if len(_model_tokens(card)) == most]
    if (stated := _memory_gib(query)) is not None:
        matches = [card for card in matches if round(card.vram_gib) == stated] or matches
    if vram_gib is not None and len(matches) > 1:
        return min(matches, key=lambda card: abs(card.vram_gib - vram_gib))
    return matches[0]

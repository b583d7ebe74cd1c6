"""What the decision tree chooses between: a repo's runnable files, as `Candidate`s."""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.formats.quant_levels import quant_from_name
from models.plan.forecast import ModelShape, scaled_to

# Quantized checkpoint formats the PyTorch engine runs from a hub repo.
NATIVE_FORMATS = ("awq", "gptq", "fp8")


@dataclass(slots=True, frozen=True)
class Candidate:
    """One runnable choice in a repo: a GGUF file (or split set), or an AWQ/GPTQ/FP8 checkpoint."""

    format: str  # "gguf" | "awq" | "gptq" | "fp8"
    files: tuple[str, ...]  # a split GGUF lists every part
    quant: str | None
    size_bytes: int
    shape: ModelShape


_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)


def gguf_candidates(files: list[tuple[str, int]], shape: ModelShape) -> list[Candidate]:
    """Candidates from a repo's GGUF files (name, size): split sets joined, projector files left out.

    `shape` is read from one header of the repo; the other files are scaled to their size.
    """
    sets: dict[str, list[tuple[str, int]]] = {}
    for name, size in files:
        base = name.rsplit("/", 1)[-1]
        if not base.lower().endswith(".gguf") or "mmproj" in base.lower():  # "…-mmproj-f16.gguf" too
            continue
        split = _SPLIT.match(name)
        sets.setdefault(split.group("stem") if split else name, []).append((name, size))
    out = []
    for parts in sets.values():
        parts.sort()
        size = sum(s for _, s in parts)
        quant = quant_from_name(parts[0][0])
        out.append(Candidate("gguf", tuple(n for n, _ in parts), quant, size, scaled_to(shape, size, quant)))
    return out

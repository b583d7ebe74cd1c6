"""A repo's files grouped into what a user picks: one GGUF quant level (or split set), one checkpoint."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from models.formats.hf_config import HfConfig
from models.formats.quant_levels import quality_key, quant_from_name
from models.hub.client import RepoFile

SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)


@dataclass(slots=True, frozen=True)
class FileGroup:
    """Files that are used together.

    Attributes:
        format: "gguf", "mmproj" (a GGUF vision projector), or for safetensors checkpoints the
            config's `quant_method` ("awq", "gptq", "fp8"...) or "safetensors" when unquantized.
        quant: The GGUF level (`Q4_K_M`), or `AWQ 4-bit` style for checkpoints, or None.
        name: The file name, or the split set's stem, or "checkpoint".
        files: Every file of the group, split parts in order.
        total_size: Their sizes added.
        complete: False for a split set with parts missing.
    """

    format: str
    quant: str | None
    name: str
    files: tuple[RepoFile, ...]
    total_size: int
    complete: bool = True

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def is_mmproj(path: str) -> bool:
    return "mmproj" in _base(path).lower()


def group_files(files: Iterable[RepoFile], config: HfConfig | None = None) -> list[FileGroup]:
    """GGUF groups (best quality first), then projector files, then the safetensors checkpoint."""
    ggufs: list[FileGroup] = []
    projectors: list[FileGroup] = []
    splits: dict[str, list[tuple[int, int, RepoFile]]] = {}
    tensors: list[RepoFile] = []
    for f in files:
        lower = f.path.lower()
        if lower.endswith(".safetensors"):
            tensors.append(f)
            continue
        if not lower.endswith(".gguf"):
            continue
        if is_mmproj(f.path):
            projectors.append(FileGroup("mmproj", quant_from_name(_base(f.path)), _base(f.path), (f,), f.size))
            continue
        split = SPLIT.match(f.path)
        if split:
            splits.setdefault(split.group("stem"), []).append((int(split.group("part")), int(split.group("total")), f))
            continue
        ggufs.append(FileGroup("gguf", quant_from_name(_base(f.path)), _base(f.path), (f,), f.size))
    for stem, parts in splits.items():
        parts.sort(key=lambda p: p[0])
        total = max(p[1] for p in parts)
        complete = [p[0] for p in parts] == list(range(1, total + 1)) and all(p[1] == total for p in parts)
        group_files_ = tuple(p[2] for p in parts)
        ggufs.append(FileGroup("gguf", quant_from_name(_base(stem)), _base(stem), group_files_,
                               sum(f.size for f in group_files_), complete))
    ggufs.sort(key=lambda g: (quality_key(g.quant), g.name), reverse=True)
    out = ggufs + sorted(projectors, key=lambda g: g.name)
    if tensors:
        tensors.sort(key=lambda f: f.path)
        out.append(FileGroup(*_checkpoint_kind(config), "checkpoint", tuple(tensors), sum(f.size for f in tensors)))
    return out


def _checkpoint_kind(config: HfConfig | None) -> tuple[str, str | None]:
    q = config.quantization if config is not None else None
    if q is None:
        dtype = config.torch_dtype if config is not None else None
        return "safetensors", dtype.upper().replace("FLOAT", "F") if dtype else None
    label = q.quant_method.upper() + (f" {q.bits}-bit" if q.bits else "")
    return q.quant_method, label

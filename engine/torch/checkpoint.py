"""The tensors of a Hugging Face model directory: safetensors only, sharded or not.

Pickle checkpoints (`.bin`, `.pt`, ...) are refused, never opened: unpickling runs code
from the file. A sharded checkpoint is checked against its index before anything loads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from engine.torch.model_config import CheckpointError, read_json_file
from models.formats.errors import InvalidModelFile
from models.formats.local_file import check_regular_file

INDEX_NAME = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def safetensors_files(directory: Path) -> list[Path]:
    """The shard files of the checkpoint in `directory`, checked to exist and to be regular files."""
    index = directory / INDEX_NAME
    if index.exists():
        shards = sorted(set(_index_map(index).values()))
        missing = [name for name in shards if not (directory / name).exists()]
        if missing:
            raise CheckpointError(
                f"{directory}: {len(missing)} of {len(shards)} shards named in {INDEX_NAME} are missing: "
                + ", ".join(missing[:5])
            )
        return _regular([directory / name for name in shards])
    files = sorted(directory.glob("*.safetensors"))
    if files:
        return _regular(files)
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise CheckpointError(
            f"{directory}: only pickle weights ({', '.join(pickles[:3])}); Tailor loads safetensors only, "
            "because a pickle file can run code when opened. Use the repo's .safetensors version."
        )
    raise CheckpointError(f"{directory}: no .safetensors weights found")


def _regular(paths: list[Path]) -> list[Path]:
    """`paths`, once each is known to be a regular file (safetensors' open of a FIFO waits for a writer)."""
    for path in paths:
        try:
            check_regular_file(path)
        except InvalidModelFile as exc:
            raise CheckpointError(str(exc)) from None
    return paths


def _index_map(index: Path) -> dict[str, str]:
    weight_map = read_json_file(index, INDEX_NAME).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index}: weight_map is not a map of tensor names to shard files")
    for name in weight_map.values():
        if "/" in name or "\\" in name or name.startswith("."):
            raise CheckpointError(f"{index}: shard name {name!r} points outside the model folder")
    return weight_map


class TensorSource:
    """Lazy access to every tensor of a checkpoint by name."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._files = safetensors_files(directory)
        self._handles: dict[Path, object] = {}
        self._where: dict[str, Path] = {}
        for path in self._files:
            for name in self._open(path).keys():  # noqa: SIM118 - safe_open has no __iter__
                self._where[name] = path
        index = directory / INDEX_NAME
        if index.exists():
            self._check_index(_index_map(index))

    def _open(self, path: Path):
        handle = self._handles.get(path)
        if handle is None:
            try:
                handle = safe_open(str(path), framework="pt")
            except (SafetensorError, OSError, ValueError) as exc:
                raise CheckpointError(f"{path.name}: not a readable safetensors file ({exc})") from None
            self._handles[path] = handle
        return handle

    def _check_index(self, weight_map: dict[str, str]) -> None:
        for name, shard in weight_map.items():
            actual = self._where.get(name)
            if actual is None or actual.name != shard:
                found = f"found in {actual.name}" if actual else "found in no shard"
                raise CheckpointError(
                    f"{self.directory}: the index puts tensor {name!r} in {shard}, but it is {found}"
                )
        extra = sorted(set(self._where) - set(weight_map))
        if extra:
            raise CheckpointError(
                f"{self.directory}: {self._where[extra[0]].name} holds tensors the index does not list: "
                + ", ".join(extra[:3])
            )

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def names(self) -> Iterator[str]:
        return iter(self._where)

    def get(self, name: str) -> torch.Tensor:
        path = self._where.get(name)
        if path is None:
            raise CheckpointError(f"{self.directory}: tensor {name!r} is missing from the checkpoint")
        try:
            return self._open(path).get_tensor(name)
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"{path.name}: tensor {name!r} is unreadable ({exc})") from None

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self._files)

    def close(self) -> None:
        self._handles.clear()

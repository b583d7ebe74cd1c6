"""The models of the library a user can run: each GGUF file of a downloaded repo (not its vision projectors,
which are no chat model), each complete model folder, each imported file still there. The window's model
picker lists them, and `tailor serve` serves any of them on demand. Reads folders, not file headers. No Qt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from models.formats.quant_levels import quant_from_name
from models.library import ModelStore
from models.plan.folder_plan import is_model_folder


@dataclass(frozen=True, slots=True)
class DiskModel:
    """A model on disk: a GGUF file or a model folder.

    Attributes:
        path: The file or folder.
        label: How lists show it ("bartowski/Qwen2.5-7B-Instruct-GGUF · Q4_K_M", "SmolLM2-135M-Instruct.Q4_1.gguf").
        repo_id: The hub repo it was downloaded from; None for an imported or built-in file.
        quant: Its quantization, where its name says ("Q4_K_M").
        size: Its bytes on disk (a folder: 0, not summed here).
    """

    path: str
    label: str
    repo_id: str | None = None
    quant: str | None = None
    size: int = 0


def models_on_disk(store: ModelStore, extra: Iterable[str] = ()) -> list[DiskModel]:
    """The library as the Models window lists it (store.list()); then the `extra` paths (the built-in model,
    the one loaded now) the library lacks."""
    library = store.list()
    found: dict[str, DiskModel] = {}
    for repo in library.repos:
        for f in repo.gguf_files:
            if "mmproj" not in f.path_in_repo.lower():
                quant = quant_from_name(f.path_in_repo)
                found.setdefault(str(f.path), DiskModel(str(f.path), f"{repo.repo_id} · {quant or f.path_in_repo}",
                                                        repo.repo_id, quant, f.size))
        for revision in repo.revisions:
            if revision.complete and is_model_folder(revision.snapshot_dir):
                path = str(revision.snapshot_dir)
                found.setdefault(path, DiskModel(path, f"{repo.repo_id} (PyTorch)", repo.repo_id))
    for model in library.imported:
        if model.exists:
            path = str(model.path)
            found.setdefault(path, DiskModel(path, _file_name(path), None, quant_from_name(path), model.size))
    for path in extra:
        if path and Path(path).exists():
            found.setdefault(str(path), DiskModel(str(path), _file_name(str(path)), None, quant_from_name(str(path)),
                                                  _size(Path(path))))
    return list(found.values())


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0

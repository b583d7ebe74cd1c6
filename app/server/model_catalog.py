"""The names a request may give a model of the library, and the model each names.

`/v1/models` lists every runnable model of the library (app/services/library_models.py) by an id that says
where it came from, the hub repo and the file (`bartowski/Qwen2.5-7B-Instruct-GGUF/Qwen2.5-7B-Instruct-Q4_K_M`),
and answers to short aliases too: the file's name without `.gguf` (`Qwen2.5-7B-Instruct-Q4_K_M`, what a
single-model `tailor serve` always called it) and Ollama's `name:tag` form (`qwen2.5-7b-instruct-gguf:q4_k_m`).
Names match exactly, else ignoring case. An alias two models share names neither (their ids still do).

The library is read again when a name matches nothing (a model downloaded since) and when the file a
name matched is gone (deleted since): reading it is a walk of a few folders, no header is opened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.server.errors import ApiError
from app.services.library_models import DiskModel

# How long a listing is reused before the folders are walked again (a `GET /v1/models` per keystroke of a
# client's model box must not rescan a large library each time).
FRESH_S = 5.0


@dataclass(slots=True, frozen=True)
class CatalogEntry:
    """A model and the names it answers to (its id first)."""

    model: DiskModel
    names: tuple[str, ...]

    @property
    def id(self) -> str:
        return self.names[0]


def names_of(model: DiskModel) -> tuple[str, ...]:
    """The id, then the aliases, of a model of the library (see the module docstring)."""
    path = model.path.replace("\\", "/").rstrip("/")
    base = path.rsplit("/", 1)[-1]
    stem = base[: -len(".gguf")] if base.lower().endswith(".gguf") else base
    if model.repo_id is None:  # an imported or built-in file: its name is all it has
        return (stem,)
    if not base.lower().endswith(".gguf"):  # a model folder (a checkpoint): the repo is the model
        return (model.repo_id, model.repo_id.rsplit("/", 1)[-1])
    repo_name = model.repo_id.rsplit("/", 1)[-1]
    tag = f"{repo_name}:{model.quant}".lower() if model.quant else None
    return tuple(dict.fromkeys(n for n in (f"{model.repo_id}/{stem}", stem, tag) if n))


class ModelCatalog:
    """The library's models by name.

    Args:
        scan: lists the models on disk (models_on_disk over the library, with the built-in model).
    """

    def __init__(self, scan: Callable[[], list[DiskModel]]):
        self._scan = scan
        self._lock = threading.Lock()
        self._entries: list[CatalogEntry] = []
        self._read_at = float("-inf")
        self._gone: dict[str, str] = {}  # names (folded) of models listed once and gone since: their paths

    def entries(self, fresh: bool = False) -> list[CatalogEntry]:
        """Every model with its names; the folders walked again when `fresh` or the last walk is old."""
        with self._lock:
            if fresh or time.monotonic() - self._read_at > FRESH_S:
                before, self._entries = self._entries, _named(self._scan())
                self._read_at = time.monotonic()
                kept = {e.model.path for e in self._entries}
                for entry in before:
                    if entry.model.path not in kept:
                        self._gone.update({n.lower(): entry.model.path for n in entry.names})
                for entry in self._entries:  # back again (downloaded anew)
                    for n in entry.names:
                        self._gone.pop(n.lower(), None)
            return list(self._entries)

    def resolve(self, name: str) -> CatalogEntry:
        """The model `name` names.

        Raises:
            ApiError: 404 (naming the first models there are) when no model answers to it; 400 when its
                file was deleted since it was listed (the library is read again).
        """
        entry = _find(self.entries(), name) or _find(self.entries(fresh=True), name)
        gone = self._gone.get(name.lower()) if entry is None else None
        if gone is not None:
            raise ApiError(400, f"The model '{name}' was deleted from the library: {gone} is gone.",
                           "invalid_request_error", "model", "model_deleted")
        if entry is None:
            listed = [e.id for e in self.entries()]
            shown = ", ".join(f"'{n}'" for n in listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
            raise ApiError(404, f"The model '{name}' is not in this server's library"
                                + (f"; it has {shown} (GET /v1/models)." if listed else "; the library is empty."),
                           "invalid_request_error", "model", "model_not_found")
        if not Path(entry.model.path).exists():
            self.entries(fresh=True)
            raise ApiError(400, f"The model '{name}' was deleted from the library: {entry.model.path} is gone.",
                           "invalid_request_error", "model", "model_deleted")
        return entry


def _named(models: list[DiskModel]) -> list[CatalogEntry]:
    """Each model with its names, an alias shared by two models dropped from both."""
    named = [(m, names_of(m)) for m in models]
    counts: dict[str, int] = {}
    for _model, names in named:
        for n in {n.lower() for n in names}:
            counts[n] = counts.get(n, 0) + 1
    return [CatalogEntry(m, (names[0], *(n for n in names[1:] if counts[n.lower()] == 1))) for m, names in named]


def _find(entries: list[CatalogEntry], name: str) -> CatalogEntry | None:
    exact = next((e for e in entries if name in e.names), None)
    if exact is not None:
        return exact
    folded = name.lower()
    return next((e for e in entries if any(n.lower() == folded for n in e.names)), None)

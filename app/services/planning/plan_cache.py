"""PlanCache: the plans of models on disk, made once per file, settings and machine.

The model picker shows a verdict for every model of the library ("fits on GPU", "too big") and reads
the list again after each load and each time its drop-down opens. A plan reads the file's header
(or a folder's config and safetensors headers), may look through the library for a draft model, and
runs the forecast: ~20 ms for a small GGUF, far more for a large library. Nothing it depends on
changes between two loads, so each plan is kept, keyed by the file's stamp (size, modification time,
inode; a folder's top-level files) and the settings, and the whole cache is dropped when the library
(the models on disk and their stamps: Speculative: Auto drafts with another model of it) or the
planner's machine changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import HardwareProfile
from models.plan.decision_tree import Plan

# (name, size, modification time in ns, inode) of each file that identifies a model's bytes
Stamp = tuple[tuple[str, int, int, int], ...]


def stamp_of(path: str) -> Stamp:
    """What changes when a model's bytes may have: a file's size, time and inode, with its folder's (a
    shard or a projector added beside it); a model folder's top-level files. Links are followed (the
    hub's snapshots link to blobs). Empty when the path cannot be read: planned again every time."""
    try:
        if os.path.isdir(path):
            with os.scandir(path) as entries:
                return tuple(sorted(_entry(e.name, e.path) for e in entries))
        return (_entry(".", path), _entry("..", os.path.dirname(path) or "."))
    except OSError:
        return ()


def _entry(name: str, path: str) -> tuple[str, int, int, int]:
    st = os.stat(path)
    return name, st.st_size, st.st_mtime_ns, st.st_ino


@dataclass(frozen=True, slots=True)
class _Validity:
    """What every cached plan was made with: the planner's machine and the library's models."""

    planner: LoadPlanner  # compared by identity: another planner is another machine
    profile: HardwareProfile
    library: frozenset[tuple[str, Stamp]]


class PlanCache:
    """Plans by (path, stamp, settings), valid for one machine and one state of the library.

    Used from one thread at a time (the picker reads its list on one pool thread, one listing at a time).
    """

    def __init__(self) -> None:
        self._plans: dict[tuple[str, Stamp, LoadSettings], Plan | None] = {}
        self._validity: _Validity | None = None
        self.planned = 0  # plans made (not found in the cache), for tests and benchmarks

    def begin(self, planner: LoadPlanner, library: Iterable[str]) -> None:
        """Start a listing of `library` (paths on disk) planned by `planner` (the chat's own: one hardware
        detection): drop every plan when the planner, its machine or the library changed since the last."""
        validity = _Validity(planner, planner.profile, frozenset((p, stamp_of(p)) for p in library))
        if validity != self._validity:
            self._plans.clear()
            self._validity = validity

    def plan(self, path: str, settings: LoadSettings) -> Plan | None:
        """The plan of `path` with `settings`, made now or found (an unreadable file: planned every time)."""
        stamp = stamp_of(path)
        key = (str(Path(path)), stamp, settings)
        if stamp and key in self._plans:
            return self._plans[key]
        if self._validity is None:
            raise RuntimeError("PlanCache.plan before begin(): no planner")
        plan = self._validity.planner.plan_load(path, settings).plan
        self.planned += 1
        if stamp:
            self._plans[key] = plan
        return plan

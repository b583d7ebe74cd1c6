"""The model picker's list after a load: every model planned again (as before PlanCache) vs planned once.

After each load the picker reads the library and gives each model a verdict for this machine. A
library of 12 GGUF files (the starter model under 12 names, hard links) is listed as the window lists
it (models_on_disk, then a verdict each, planned by a LoadPlanner that looks for Speculative: Auto's
drafts in the same library): with an empty PlanCache each time (every model planned again, as the
picker did before) and with the cache the picker keeps (nothing changed since the last listing).
Median of 10 of each, interleaved.

    python -m tests.bench.picker_refresh
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from app.chat.load_settings import load_settings_of
from app.gui.model_picker.picker_list import choices, models_on_disk
from app.services.history.store import ChatSettings
from app.services.planning.draft_finder import DraftFinder, library_ggufs
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.plan_cache import PlanCache
from engine.starter import starter_model_path
from models.hardware.profile import profile_for
from models.library import ModelStore

MODELS = 12
RUNS = 10


def _listing(store: ModelStore, planner: LoadPlanner, cache: PlanCache) -> float:
    """Milliseconds to list the library with a verdict each, as ModelPicker.refresh_models does."""
    started = time.perf_counter()
    models = models_on_disk(store)
    cache.begin(planner, (m.path for m in models))
    found = choices(models, lambda path: cache.plan(path, load_settings_of(ChatSettings(), (), path)))
    assert len(found) == MODELS and all(c.fits for c in found)
    return (time.perf_counter() - started) * 1000


def measure() -> tuple[float, float]:
    """(every model planned again, planned once) in ms, medians."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = ModelStore(root / "data", root / "hub")
        starter = starter_model_path()
        for i in range(MODELS):
            link = root / f"model-{i:02}.Q4_1.gguf"
            os.link(starter, link)
            store.import_gguf(link)
        planner = LoadPlanner(profile_for("RTX 4090", ram_gib=32), status_dir=root,
                              drafts=DraftFinder(lambda: library_ggufs(store)))
        kept = PlanCache()
        _listing(store, planner, kept)  # the first listing plans every model
        again, once = [], []
        for _ in range(RUNS):
            again.append(_listing(store, planner, PlanCache()))
            once.append(_listing(store, planner, kept))
        return statistics.median(again), statistics.median(once)


def main() -> None:
    again, once = measure()
    print(f"picker_listing_replanned_ms={again:.1f} ({MODELS} models, every one planned again, as before)")
    print(f"picker_listing_cached_ms={once:.1f} (planned once per file and settings)")
    print(f"picker_listing_ratio={again / once:.1f}x")


if __name__ == "__main__":
    main()

"""The pool `tailor serve` serves from: every model of the library, on this machine as it was at start."""

from __future__ import annotations

from collections.abc import Callable

from app.server.model_catalog import ModelCatalog
from app.server.model_pool import ModelPool, PoolSettings
from app.server.own_engine import OwnEngine
from app.services.library_models import models_on_disk
from app.services.load_settings import LoadSettings
from app.services.paths import AppPaths
from app.services.planning.draft_finder import library_drafts
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.machine import detect_machine
from models.hardware.profile import HardwareProfile
from models.library import ModelStore


def library_pool(paths: AppPaths, base: LoadSettings, extra: list[str] | Callable[[], list[str]], ttl_s: float,
                 queue_timeout_s: float, parallel: int, overrides: dict[str, LoadSettings] | None = None,
                 profile: HardwareProfile | None = None, log_name: str = "engine") -> ModelPool:
    """The pool of `tailor serve`: the library's models (and the `extra` paths: the built-in model, --model)
    planned on this machine as `profile` has it (detected now when None: read once, so every model is planned
    on the same figures less what the others' forecasts take). Its engines log to `<log_name>.log`,
    `<log_name>-1.log`... in the log folder."""
    drafts = library_drafts(paths.data_dir)
    profile = profile or detect_machine()
    extras = extra if callable(extra) else (lambda: extra)  # the window's: the model it has loaded now
    catalog = ModelCatalog(lambda: models_on_disk(ModelStore(paths.data_dir), extras()))
    counter = iter(range(1_000_000))

    def new_engine() -> OwnEngine:  # a log per engine process: several run at once
        n = next(counter)
        log_path = paths.engine_log.with_name(f"{log_name}.log" if n == 0 else f"{log_name}-{n}.log")
        return OwnEngine(log_path=log_path, prefix_cache_dir=paths.prefix_cache, drafts=drafts)

    def new_planner(reserved: dict[str, int]) -> LoadPlanner:
        return LoadPlanner(profile, prefix_cache_dir=paths.prefix_cache, drafts=drafts, reserved=reserved)

    settings = PoolSettings(base, dict(overrides or {}), ttl_s, queue_timeout_s)
    return ModelPool(catalog, settings, new_engine, new_planner, parallel)

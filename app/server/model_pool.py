"""ModelPool: any model of the library, loaded when a request names it, several at once where the plan says
they fit together.

Each loaded model runs in an engine process of its own (OwnEngine), with its own EnginePort (its replies,
`parallel` at a time). What they take is planned together: the machine is read once, when the pool starts,
and every new model is planned on what is left of it once the forecasts of the models loaded already are
taken (Machine.without): no model is loaded in the hope that it fits.

When a new model would not fit as it fits alone (it would not fit at all, or fewer of its layers would be
on the GPU), the idle models are unloaded, least recently used first, until it does. A model busy with a
reply is never unloaded: a request whose model can only fit once one of them is idle waits for that, up to
the queue timeout, then gets a 503 naming what it needs. Loads happen one at a time (each plan must see the
memory the previous load took); a request for a model loaded already never waits for another's load.

An idle model is unloaded after its keep-alive: the server's TTL, or what the last request for it said
(Ollama's `keep_alive`: 0 right after the reply, negative never). A model the server was started with
(`tailor serve --model`) stays until the server stops, unless a request says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.chat.model_state import with_projector
from app.server.engine_port import EnginePort
from app.server.errors import ApiError
from app.server.model_catalog import CatalogEntry, ModelCatalog
from app.server.model_router import Lease, LoadedModel, ServedModel
from app.server.own_engine import ModelLoadError, OwnEngine
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner, PlannedLoad
from engine.interface import Engine
from engine.protocol import ModelInfo
from models.plan.decision_tree import Plan
from models.units import gb

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 600.0  # LM Studio's and Ollama's idle unload is minutes too (Ollama: 5)
REAP_INTERVAL_S = 1.0


@dataclass(slots=True, frozen=True)
class PoolSettings:
    """How the pool loads and keeps models.

    Attributes:
        load: The settings every model is loaded with (context, KV type, replies at once...); a GGUF model
            with a projector beside it is loaded with it (it sees).
        overrides: Settings of their own for some models, by path (`tailor serve --model M --mmproj P`).
        ttl_s: Seconds an idle model stays loaded; negative: until the server stops.
        queue_timeout_s: How long a request waits for memory held by busy models before a 503.
        load_timeout_s: How long one load may take.
    """

    load: LoadSettings = LoadSettings()
    overrides: dict[str, LoadSettings] = field(default_factory=dict)
    ttl_s: float = DEFAULT_TTL_S
    queue_timeout_s: float = 300.0
    load_timeout_s: float = 600.0


@dataclass(slots=True, eq=False)
class _Slot:
    """A loaded model."""

    entry: CatalogEntry
    engine: OwnEngine
    port: EnginePort
    info: ModelInfo
    plan: Plan | None
    memory: dict[str, int]  # the plan's forecast per device, what `without` takes for the next plan
    keep_alive_s: float
    leases: int = 0
    last_used: float = field(default_factory=time.monotonic)
    load_s: float = 0.0
    external: bool = False  # another's engine (the window's chat model): served, never unloaded here

    @property
    def alive(self) -> bool:
        return self.engine.model_info() is not None  # None once the engine died


class _Borrowed:
    """The engine of a model the pool serves but does not own (the window's): the pool never stops it."""

    def __init__(self, model_info: Callable[[], ModelInfo | None]):
        self.model_info = model_info

    def shutdown(self) -> None:
        pass


EngineFactory = Callable[[], OwnEngine]
PlannerFactory = Callable[[dict[str, int]], LoadPlanner]  # the planner for a load beside so much per device


class ModelPool:
    """The ModelRouter of `tailor serve` over the library (see the module docstring).

    Args:
        catalog: the library's models by name.
        settings: how models are loaded and kept.
        new_engine: an engine process of its own for each model loaded.
        new_planner: a planner for the machine less the bytes per device given (the machine read once).
        parallel: replies at once on each model.
    """

    def __init__(self, catalog: ModelCatalog, settings: PoolSettings, new_engine: EngineFactory,
                 new_planner: PlannerFactory, parallel: int):
        self.catalog, self.settings = catalog, settings
        self._new_engine, self._new_planner, self._parallel = new_engine, new_planner, parallel
        self._slots: dict[str, _Slot] = {}  # by the model's path
        self._load_lock: asyncio.Lock | None = None
        self._released: asyncio.Condition | None = None
        self._reaper: asyncio.Task | None = None
        self._lock = threading.Lock()  # _slots is read from other threads (listing, tests)
        self.default: str | None = None  # the path of the model a request naming none gets
        self.load_log: list[tuple[str, float]] = []  # (model id, seconds) of each load, for the log and benches
        self._fits: dict[tuple[str, float], tuple[str | None, int]] = {}  # (path, mtime) → (verdict, context)

    # ------------------------------------------------------------------ the router contract

    def listing(self) -> list[ServedModel]:
        with self._lock:
            loaded = dict(self._slots)
        out = [self._served(e, loaded.get(e.model.path)) for e in self.catalog.entries()]
        return sorted(out, key=lambda m: not m.loaded)

    def loaded(self) -> list[LoadedModel]:
        now = time.monotonic()
        with self._lock:
            slots = list(self._slots.values())
        out = []
        for slot in slots:
            busy = slot.leases
            idle = 0.0 if busy else now - slot.last_used
            expires = None if slot.keep_alive_s < 0 else max(0.0, slot.keep_alive_s - idle)
            out.append(LoadedModel(self._served(slot.entry, slot), slot.info, dict(slot.memory), busy, idle,
                                   None if busy else expires))
        return out

    def stand_in(self, name: str | None) -> ModelInfo | None:
        slot = self._slot_named(name)
        return slot.info if slot is not None else None

    async def acquire(self, name: str | None, keep_alive: float | None = None) -> Lease:
        self._start()
        entry = self._entry(name)
        slot = self._live_slot(entry.model.path)
        if slot is None:
            assert self._load_lock is not None
            async with self._load_lock:  # one load at a time: each plan sees what the one before took
                slot = self._live_slot(entry.model.path) or await self._load(entry, keep_alive)
        return self._lend(slot, keep_alive)

    # ------------------------------------------------------------------ lifecycle

    def preload(self, path: str) -> ModelInfo:
        """Load the model at `path` before the server starts (the one `tailor serve` names, or the built-in
        one) and make it the default, kept until the server stops unless a request says otherwise.

        Raises:
            ModelLoadError: it cannot be loaded (or `path` is not in the catalog).
        """
        entry = next((e for e in self.catalog.entries(fresh=True) if e.model.path == path), None)
        if entry is None:
            raise ModelLoadError(f"{path}: no such file" if not Path(path).exists() else
                                 f"{path} is not a model Tailor can run (a GGUF file or a model folder)")
        settings = self._settings_for(path)
        planned = self._new_planner({}).plan_load(path, settings)
        if planned.refusal is not None:
            raise ModelLoadError(planned.refusal)
        engine = self._new_engine()
        started = time.monotonic()
        try:
            info = engine.load(Path(path), settings, self.settings.load_timeout_s, planned)
        except ModelLoadError:
            engine.shutdown()
            raise
        self._register(entry, engine, info, planned, -1.0, time.monotonic() - started)
        self.default = path
        return info

    def attach(self, path: str, client: Engine, model_info: Callable[[], ModelInfo | None], plan: Plan | None) -> bool:
        """Serve a model another owns (the window's chat model, in `client`) as one of the pool's: requests
        naming it, or none, share its engine; new loads are planned beside its forecast; it is never
        unloaded here. It replaces the model attached before; False when `path` is not in the catalog or
        nothing is loaded in `client`."""
        info = model_info()
        entry = next((e for e in self.catalog.entries(fresh=True) if e.model.path == path), None)
        self.detach()
        if info is None or entry is None:
            return False
        port = EnginePort(client, model_info, self._parallel, self.settings.queue_timeout_s)
        slot = _Slot(entry, _Borrowed(model_info), port, info, plan, _memory_of(plan, entry), -1.0,  # type: ignore[arg-type]
                     external=True)
        with self._lock:
            self._slots[path] = slot
        self.default = path
        return True

    def detach(self) -> None:
        """Stop serving the attached model (the window unloaded it, or loads another)."""
        with self._lock:
            for path, slot in list(self._slots.items()):
                if slot.external:
                    del self._slots[path]
                    if self.default == path:
                        self.default = None

    async def unload(self, name: str) -> bool:
        """Unload the model `name` names once its replies end; False when it is not loaded."""
        slot = self._slot_named(name)
        if slot is None or slot.external:
            return False
        slot.keep_alive_s = 0.0
        if slot.leases == 0:
            await self._unload(slot)
        return True

    async def close(self) -> None:
        """Stop the reaper and every engine (the server is stopping)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        with self._lock:
            slots, self._slots = [s for s in self._slots.values() if not s.external], {}
        for slot in slots:
            await asyncio.to_thread(slot.engine.shutdown)

    def shutdown(self) -> None:
        """`close` from outside the event loop, after it stopped (the engines only)."""
        with self._lock:
            slots, self._slots = [s for s in self._slots.values() if not s.external], {}
        for slot in slots:
            slot.engine.shutdown()

    # ------------------------------------------------------------------ inside

    def _start(self) -> None:
        """The asyncio parts, made on the server's loop at its first request."""
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
            self._released = asyncio.Condition()
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    def _entry(self, name: str | None) -> CatalogEntry:
        if name:
            return self.catalog.resolve(name)
        default = self.default or next(iter(self._slots), None)
        entry = next((e for e in self.catalog.entries() if e.model.path == default), None) if default else None
        if entry is None:
            raise ApiError(400, "Name a model: this server serves every model of its library (GET /v1/models).",
                           param="model", code="model_required")
        return entry

    def _slot_named(self, name: str | None) -> _Slot | None:
        try:
            entry = self._entry(name)
        except ApiError:
            return None
        return self._live_slot(entry.model.path)

    def _live_slot(self, path: str) -> _Slot | None:
        with self._lock:
            slot = self._slots.get(path)
        if slot is not None and slot.external:
            return slot if slot.alive else None  # the window's model, while it is loaded there
        if slot is not None and not slot.alive:  # its engine died: load it again
            log.warning("the engine of %s died; it is loaded again on its next request", slot.entry.id)
            with self._lock:
                self._slots.pop(path, None)
            threading.Thread(target=slot.engine.shutdown, daemon=True).start()
            return None
        return slot

    def _lend(self, slot: _Slot, keep_alive: float | None) -> Lease:
        slot.leases += 1
        if keep_alive is not None:
            slot.keep_alive_s = keep_alive
        loop = asyncio.get_running_loop()

        def released() -> None:
            # On the loop's thread (a handler's `finally`) the count drops now, before the reply's last byte
            # leaves: a client that reads the reply and then asks what is loaded sees the model idle.
            # From any other thread it is handed to the loop.
            if _running_loop() is loop:
                self._returned(slot)
                return
            with contextlib.suppress(RuntimeError):  # the loop closed: the server stopped
                loop.call_soon_threadsafe(self._returned, slot)

        return Lease(slot.entry.id, slot.info, slot.port, released)

    def _returned(self, slot: _Slot) -> None:
        slot.leases -= 1
        slot.last_used = time.monotonic()
        if slot.leases == 0 and slot.keep_alive_s == 0:
            asyncio.get_running_loop().create_task(self._unload(slot))
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        assert self._released is not None
        async with self._released:
            self._released.notify_all()

    def _used(self, but: _Slot | None = None) -> dict[str, int]:
        used: dict[str, int] = {}
        with self._lock:
            slots = [s for s in self._slots.values() if s is not but]
        for slot in slots:
            for device, size in slot.memory.items():
                used[device] = used.get(device, 0) + size
        return used

    async def _load(self, entry: CatalogEntry, keep_alive: float | None) -> _Slot:
        """Plan `entry` beside the models loaded, unloading idle ones (least recently used first) or waiting
        for busy ones while it does not fit as it would alone; then load it."""
        assert self._released is not None
        path = entry.model.path
        settings = self._settings_for(path)
        alone = await asyncio.to_thread(self._new_planner({}).plan_load, path, settings)
        deadline = time.monotonic() + self.settings.queue_timeout_s
        while True:
            planned = await asyncio.to_thread(self._new_planner(self._used()).plan_load, path, settings)
            if _fits_as_alone(planned, alone):
                break
            idle = sorted((s for s in self._slots.values() if s.leases == 0 and not s.external),
                          key=lambda s: s.last_used)
            if idle:
                log.info("unloading %s to make room for %s", idle[0].entry.id, entry.id)
                await self._unload(idle[0])
                continue
            if alone.refusal is not None or (alone.plan is not None and not alone.plan.fits):
                raise ApiError(400, f"The model '{entry.id}' does not fit this machine: "
                                    f"{alone.refusal or _needs(alone.plan)}.", code="model_too_large")
            if not self._slots or planned.plan is None or (planned.refusal is None and planned.plan.fits):
                break  # it fits, if not as well as alone, and nothing can be unloaded: load it so
            left = deadline - time.monotonic()
            if left <= 0:
                busy = ", ".join(s.entry.id for s in self._slots.values())
                raise ApiError(503, f"The model '{entry.id}' needs {_needs(alone.plan)}; the models in use "
                                    f"({busy}) hold the rest. Try again when they are idle.",
                               "server_error", "model", "insufficient_memory")
            async with self._released:  # a reply ended: memory may be free now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._released.wait(), timeout=min(left, 1.0))
        engine = self._new_engine()
        started = time.monotonic()
        try:
            info = await asyncio.to_thread(engine.load, Path(path), settings, self.settings.load_timeout_s, planned)
        except (ModelLoadError, OSError) as exc:
            await asyncio.to_thread(engine.shutdown)
            raise ApiError(400, f"The model '{entry.id}' could not be loaded: {exc}", code="model_load_failed") from None
        keep = self.settings.ttl_s if keep_alive is None else keep_alive
        return self._register(entry, engine, info, planned, keep, time.monotonic() - started)

    def _register(self, entry: CatalogEntry, engine: OwnEngine, info: ModelInfo, planned: PlannedLoad,
                  keep_alive_s: float, load_s: float) -> _Slot:
        self.load_log.append((entry.id, load_s))
        log.info("loaded %s in %.2f s (%s)", entry.id, load_s, _memory_text(planned.plan))
        port = EnginePort(engine.client, engine.model_info, self._parallel, self.settings.queue_timeout_s)
        slot = _Slot(entry, engine, port, info, planned.plan, _memory_of(planned.plan, entry), keep_alive_s,
                     load_s=load_s)
        with self._lock:
            self._slots[entry.model.path] = slot
        return slot

    def _settings_for(self, path: str) -> LoadSettings:
        """The settings `path` loads with: its own, else the pool's with the projector beside it."""
        own = self.settings.overrides.get(path)
        return own if own is not None else with_projector(path, self.settings.load)

    async def _unload(self, slot: _Slot) -> None:
        if slot.external:
            return
        with self._lock:
            if self._slots.get(slot.entry.model.path) is not slot:
                return
            del self._slots[slot.entry.model.path]
        log.info("unloading %s (idle %.0f s)", slot.entry.id, time.monotonic() - slot.last_used)
        await asyncio.to_thread(slot.engine.shutdown)

    async def _reap(self) -> None:
        """Unload each model idle past its keep-alive."""
        while True:
            await asyncio.sleep(REAP_INTERVAL_S)
            now = time.monotonic()
            with self._lock:
                due = [s for s in self._slots.values() if s.leases == 0 and not s.external
                       and s.keep_alive_s >= 0 and now - s.last_used >= s.keep_alive_s]
            for slot in due:
                await self._unload(slot)

    def _served(self, entry: CatalogEntry, slot: _Slot | None) -> ServedModel:
        model = entry.model
        try:
            modified = Path(model.path).stat().st_mtime
        except OSError:
            modified = 0.0
        info = slot.info if slot is not None else None
        fit, context = self._fit(model.path, modified)
        return ServedModel(entry.id, entry.names, model.path, model.size or (info.size_bytes if info else 0),
                           "gguf" if model.path.lower().endswith(".gguf") else "safetensors", model.quant,
                           info.architecture if info else None, modified, slot is not None, fit,
                           info.n_ctx if info else context)

    def _fit(self, path: str, modified: float) -> tuple[str | None, int]:
        """How the model fits this machine alone (its plan's verdict) and the context it would get: a header
        read, once per file (and again when it changes). Listings run off the event loop."""
        key = (path, modified)
        if key not in self._fits:
            planned = self._new_planner({}).plan_load(path, self._settings_for(path))
            plan = planned.plan
            if plan is None:
                verdict = None
            elif planned.refusal is not None or not plan.fits:
                verdict = "too large"
            elif plan.n_gpu_layers > plan.n_layers:
                verdict = "fits fully on GPU"
            elif plan.n_gpu_layers > 0:
                verdict = f"partial offload: {plan.n_gpu_layers}/{plan.n_layers} layers on GPU"
            else:
                verdict = "CPU · fits in RAM"
            self._fits[key] = (verdict, plan.context if plan is not None else 0)
        return self._fits[key]


def _fits_as_alone(planned: PlannedLoad, alone: PlannedLoad) -> bool:
    """Whether the plan beside the loaded models is as good as alone: it fits, no layer fewer on the GPU."""
    if planned.refusal is not None or planned.plan is None or alone.plan is None:
        return planned.refusal is None and (planned.plan is None or planned.plan.fits)
    return planned.plan.fits and planned.plan.n_gpu_layers >= alone.plan.n_gpu_layers


def _memory_of(plan: Plan | None, entry: CatalogEntry) -> dict[str, int]:
    """What a loaded model holds per device, by its plan's forecast (its file's size in RAM without one)."""
    if plan is None or plan.forecast is None:
        return {"cpu": entry.model.size}
    return {device: part.total_bytes for device, part in plan.forecast.devices.items() if part.total_bytes}


def _needs(plan: Plan | None) -> str:
    return _memory_text(plan) if plan is not None else "more memory than is free"


def _memory_text(plan: Plan | None) -> str:
    if plan is None or plan.forecast is None:
        return "no forecast"
    parts = [f"{gb(d.total_bytes)} on {'the CPU' if name == 'cpu' else name}"
             for name, d in plan.forecast.devices.items() if d.total_bytes]
    return ", ".join(parts) or "no memory"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

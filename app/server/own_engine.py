"""OwnEngine: an engine process of the server's own, with one model loaded (for `tailor serve`)."""

from __future__ import annotations

import threading
from pathlib import Path

from app.services.load_settings import LoadSettings
from app.services.planning.draft_finder import DraftFinder
from app.services.planning.load_planner import LoadPlanner, PlannedLoad
from engine.client import EngineClient
from engine.protocol import Error, Event, Loaded, ModelInfo


class ModelLoadError(RuntimeError):
    """The model could not be loaded (the message is the engine's)."""


class OwnEngine:
    """Starts the engine process and loads a model; keeps track of what is loaded.

    Args:
        log_path: the engine process's log file.
        prefix_cache_dir: where warm prefixes are kept across restarts.
        drafts: where speculative decoding's Auto looks for a draft model (the user's library), or None.
    """

    def __init__(self, log_path: Path | None = None, prefix_cache_dir: Path | None = None,
                 drafts: DraftFinder | None = None):
        self.client = EngineClient(on_event=self._on_event, log_path=log_path)
        self._planner = LoadPlanner(prefix_cache_dir=prefix_cache_dir, drafts=drafts)
        self._info: ModelInfo | None = None
        self._answer: Loaded | Error | None = None
        self._answered = threading.Event()

    def model_info(self) -> ModelInfo | None:
        return self._info

    def load(self, path: Path, settings: LoadSettings, timeout: float = 600.0,
             planned: PlannedLoad | None = None) -> ModelInfo:
        """Start the engine and load `path` as the plan says (`planned`, where the caller planned it on a
        machine of its own: beside other models); raise ModelLoadError on failure."""
        planned = planned or self.plan(path, settings)
        if planned.refusal is not None:  # before the engine starts: nothing is allocated
            raise ModelLoadError(planned.refusal)
        self.client.start()
        self._answered.clear()
        self.client.load(planned.request)
        if not self._answered.wait(timeout):
            raise ModelLoadError(f"The engine did not load {path} within {timeout:.0f} s.")
        if isinstance(self._answer, Error):
            raise ModelLoadError(self._answer.message)
        assert isinstance(self._answer, Loaded)
        self._info = self._answer.info
        return self._info

    def plan(self, path: Path, settings: LoadSettings) -> PlannedLoad:
        """How `path` is loaded on this machine (with a draft model from the library where Auto finds one)."""
        return self._planner.plan_load(str(path), settings)

    def shutdown(self) -> None:
        self._info = None
        self.client.shutdown()

    def _on_event(self, event: Event) -> None:
        """Events of no server request: load answers and engine failures (memory reports are dropped)."""
        if isinstance(event, Loaded | Error) and not self._answered.is_set():
            self._answer = event
            self._answered.set()
        elif isinstance(event, Error) and event.kind == "engine_died":
            self._info = None  # requests now get 503 instead of waiting on a dead engine

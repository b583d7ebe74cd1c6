"""ModelState: the model the engine should have, the one it has, and the way back after a failure.

A conversation asks for (model path, LoadSettings); the model is loaded again when another
conversation asks for other settings, or the user picks another model. A load that fails goes
back to the last model that loaded (with the next message); a load the user cancels goes back
to it at once (the engine freed it for the load); an engine that died stays dead until Reload.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol

from app.chat.listener import SessionListener
from app.chat.media_tokens import ClipTokenCount, ClipTokens, ImageTokenCount, ProjectorTokens
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import PlannedLoad
from engine.interface import Engine, EngineNotRunning
from engine.protocol import Error, Loaded, LoadProgress
from models.formats.errors import InvalidModelFile
from models.formats.projector_header import ProjectorInfo, read_projector_info
from models.formats.projector_pairing import projector_beside
from models.plan.decision_tree import Plan

Wanted = tuple[str, LoadSettings]  # (model path, settings asked for)


class Planner(Protocol):
    """Plans a load (the local LoadPlanner; a stand-in while chatting with a remote server)."""

    def plan_load(self, path: str, settings: LoadSettings) -> PlannedLoad: ...


def file_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


class ModelState:
    """Loads models on one engine and keeps track of what is loaded.

    Args:
        engine: the engine (local process or remote server).
        planner: plans each load (GPU layers, context for Auto, KV type...).
        model_path: the model to load first.
        listener: told of model changes, plans and problems.
    """

    def __init__(self, engine: Engine, planner: Planner, model_path: str, listener: SessionListener):
        self.engine, self.planner, self.listener = engine, planner, listener
        self.path = str(model_path)
        self.plan: Plan | None = None  # the plan of the last load asked for
        self.n_ctx = 0  # the context of the model loaded now; 0 when unknown (a remote server)
        # Whether the model loaded now reads tools: its template has a tool-call format Tailor parses (a
        # remote server's model is taken to: the server says when it does not).
        self.takes_tools = False
        self.sees_images = False  # the loaded model has a projector that takes images
        self.hears_audio = False  # ... that takes audio
        self.audio_sample_rate: int | None = None  # the rate it hears (clips are sent resampled to it)
        # The context tokens an image (a clip) takes with the loaded projector (the context guard counts them).
        self.image_tokens: ImageTokenCount | None = None
        self.clip_tokens: ClipTokenCount | None = None
        self.dead = False  # the engine died: nothing runs until Reload
        self._good: Wanted | None = None  # the last model that loaded, with its settings
        self._loaded: Wanted | None = None
        self._loading: Wanted | None = None
        self._label = ""  # what model_changed said of the model loaded now

    @property
    def loaded(self) -> Wanted | None:
        """What is loaded now; None while loading or after a failure."""
        return self._loaded if self._loading is None else None

    @property
    def answering(self) -> str:
        """The file name of the model that answers now (kept with each reply: chats outlive their models)."""
        return file_name(self._loaded[0] if self._loaded else self.path)

    @property
    def loading(self) -> Wanted | None:
        return self._loading

    def wants(self, settings: LoadSettings) -> Wanted:
        return self.path, settings

    def start(self, settings: LoadSettings) -> None:
        """Start the engine (if it is not running) and load the model."""
        if not self.engine.running:
            self.engine.start()
        self.dead = False
        self.request_load(self.wants(settings))

    def restart(self, settings: LoadSettings) -> None:
        """Start the engine afresh (after it died) and load the model again."""
        self.listener.problem_cleared()
        self.engine.restart()
        self.dead = False
        self.request_load(self.wants(settings))

    def use(self, engine: Engine, planner: Planner) -> tuple[Engine, Planner]:
        """Drive another engine from now on (the caller restarts it); the previous engine and planner."""
        previous = self.engine, self.planner
        self.engine, self.planner = engine, planner
        self._loaded = self._loading = None
        return previous

    def request_load(self, wanted: Wanted) -> bool:
        """Ask for a model, as the planner plans it (Loaded or an Error answers); False, with the problem
        said, when the plan refuses the load (a context that does not fit): the engine keeps what it has."""
        path, settings = wanted
        before = self._loaded, self._label
        self._loaded, self._loading = None, wanted
        self.listener.model_changed(f"Loading {file_name(path)} …")
        planned = self.planner.plan_load(path, with_projector(path, settings))
        self.plan = planned.plan
        self.listener.planned(planned.plan)
        if planned.refusal is not None:
            (self._loaded, self._label), self._loading = before, None
            self.listener.model_changed(self._label if self._loaded else "No model loaded")
            self.listener.problem(f"Could not load the model {file_name(path)}: {planned.refusal}", False)
            return False
        self.engine.load(planned.request)  # EngineNotRunning: the caller reports the engine as dead
        return True

    def on_loaded(self, event: Loaded) -> None:
        info = event.info
        self._loaded = self._loading or (info.path, LoadSettings(info.n_ctx))
        self._loading = None
        self._good = self._loaded
        self.n_ctx = info.n_ctx
        self.takes_tools = info.tool_format is not None or info.architecture == "remote"
        self.sees_images = info.vision
        self.hears_audio = info.audio and bool(info.audio_sample_rate)
        self.audio_sample_rate = info.audio_sample_rate if self.hears_audio else None
        projector = _projector_info(info.projector) if info.vision or info.audio else None
        self.image_tokens = ProjectorTokens(projector) if projector is not None and info.vision else None
        self.clip_tokens = (ClipTokens(projector.audio) if projector is not None and projector.audio is not None
                            and self.hears_audio else None)
        where = "remote" if info.architecture == "remote" else f"context {info.n_ctx}"
        self._label = f"{info.name} · {where}"
        self.listener.model_changed(self._label)
        if info.notice:  # loaded with fewer GPU layers than planned: say why
            self.listener.notice(info.notice)
        if not info.n_ctx:  # a remote server: its own context, not reported
            self.listener.context_loaded("")
        elif self._loaded[1].n_ctx is None:
            self.listener.context_loaded(f"Context: Auto — {info.n_ctx:,} tokens")
        else:
            self.listener.context_loaded(f"Context: {info.n_ctx:,} tokens")

    def on_load_failed(self, event: Error) -> None:
        failed = self._loading[0] if self._loading else self.path
        self._loading = self._loaded = None
        if self._good and self._good[0] != failed:
            self.path = self._good[0]  # the next reply loads the model that worked
            self.listener.model_changed(f"{file_name(self.path)} (loads again with the next message)")
        else:
            self.listener.model_changed("No model loaded")
        self.listener.problem(f"Could not load the model {failed}: {event.message}", False)

    def on_load_progress(self, event: LoadProgress) -> None:
        if self._loading is not None:  # a late report of a load already ended or cancelled is not shown
            self.listener.load_progress(event.fraction, event.stage)

    def cancel_load(self) -> bool:
        """Ask the engine to stop the load running now; False (with a notice) when there is none, or the
        engine cannot (a remote server). Its `load_cancelled` error, or its Loaded, answers."""
        if self._loading is None:
            return False
        cancel = getattr(self.engine, "cancel_load", None)  # the local engine's; a remote load is quick
        if cancel is None:
            self.listener.notice("This engine cannot cancel a load.")
            return False
        cancel()  # EngineNotRunning: the caller reports the engine as dead
        self.listener.model_changed(f"Cancelling {file_name(self._loading[0])} …")
        return True

    def on_load_cancelled(self, event: Error) -> None:
        """The engine stopped the load as asked, with no model loaded: the one loaded before comes back."""
        cancelled = self._loading or self.wants(LoadSettings())
        self._loading = self._loaded = None
        back = self._good
        if back is None or back == cancelled:  # nothing to go back to (or that was the way back)
            self.listener.model_changed("No model loaded")
            self.listener.notice(f"Loading {file_name(cancelled[0])} was cancelled; no model is loaded.")
            return
        self.path = back[0]
        self.listener.notice(f"Loading {file_name(cancelled[0])} was cancelled; loading {file_name(back[0])} again.")
        self.request_load(back)  # EngineNotRunning: the caller reports the engine as dead

    def on_died(self, event: Error) -> None:
        self.dead = True
        self._loaded = self._loading = None
        self.listener.model_changed("Engine stopped")
        self.listener.problem(f"The engine stopped. {event.message} Your chat is saved; press Reload.", True)

    def context_for(self, settings: LoadSettings) -> tuple[int, int | None] | None:
        """(context, largest context that fits or None) a reply loaded with `settings` gets; None when not
        known: a remote server (its own context), or a file the planner cannot read (the load fails and
        the engine says why)."""
        wanted = self.wants(settings)
        if self.loaded == wanted and self.n_ctx:
            return self.n_ctx, _max_context(self.plan)  # the plan the loaded model follows
        # A reload comes first; Auto decides its context only when planned. This is the plan that load
        # makes (a header read and some arithmetic: ~20 ms for the starter model, on this thread as the
        # load's own is), needed only for the first message after a change of model or settings.
        plan = self.planner.plan_load(wanted[0], with_projector(*wanted)).plan
        if plan is None:
            return None
        return settings.n_ctx or plan.context, _max_context(plan)


def with_projector(path: str, settings: LoadSettings) -> LoadSettings:
    """`settings` with the projector found beside a GGUF model file (models/formats/projector_pairing.py), so a
    vision model downloaded with its mmproj sees; settings that name one keep theirs."""
    if settings.mmproj is not None or not path.lower().endswith(".gguf"):
        return settings
    found = projector_beside(Path(path))
    return replace(settings, mmproj=str(found)) if found is not None else settings


def _projector_info(projector: str | None) -> ProjectorInfo | None:
    """The loaded projector's header (read again: a few KB), for its image- and audio-token counts; None when it
    cannot be read now (the guard then counts the text alone, and the engine still refuses what does not fit)."""
    if projector is None:
        return None
    try:
        return read_projector_info(projector)
    except (InvalidModelFile, OSError):
        return None


def not_running(exc: EngineNotRunning) -> Error:
    """The error a request to a gone engine stands for."""
    return Error("engine_died", f"The engine is not running ({exc}).")


def _max_context(plan: Plan | None) -> int | None:
    """The largest context that fits, as the plan found it; None without a plan."""
    return (plan.max_context or None) if plan is not None else None

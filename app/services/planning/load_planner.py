"""Turn "load this file with this context" into a LoadRequest that follows the plan.

The front ends ask for a model; the decision tree says how many layers go to the GPU,
which KV type and whether flash attention is on, so the engine loads what the forecast
described. No Qt here: the CLI and the window both use it.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from app.services.chat_defaults import DEFAULT_N_CTX
from app.services.load_settings import LoadSettings
from app.services.paths import AppPaths
from app.services.planning.draft_finder import DraftFinder
from app.services.planning.draft_plan import PlanOn, plan_with_draft
from app.services.planning.machine import detect_machine
from app.services.planning.projector_plan import plan_with_projector
from engine.protocol import LoadRequest
from models.formats.errors import InvalidModelFile
from models.hardware.profile import HardwareProfile
from models.plan.decision_tree import Plan, make_plan
from models.plan.folder_plan import folder_candidate, is_model_folder, plan_folder
from models.plan.load_options import KvType, SpeculativeOptions
from models.plan.machine import Machine
from models.plan.sources import gguf_file_candidate
from models.units import gb

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class PlannedLoad:
    request: LoadRequest
    plan: Plan | None  # None when the header could not be read: the engine reports why
    # Why the load must not be sent, in one line for the user; None: send it. llama.cpp allocates the whole
    # KV cache at load, so a context far past what fits costs gigabytes and many seconds before it fails.
    refusal: str | None = None


class LoadPlanner:
    """Plans loads on one machine; the hardware is detected once, when first needed."""

    def __init__(self, profile: HardwareProfile | None = None, prefix_cache_dir: Path | None = None,
                 status_dir: Path | None = None, drafts: DraftFinder | None = None,
                 reserved: Mapping[str, int] | None = None):
        self._profile = profile
        # Bytes per device ("cpu", "cuda:0") other models hold already: plans go beside them (a server's pool).
        self._reserved = dict(reserved or {})
        # Where Speculative: Auto looks for a draft model (the library); None: it drafts by prompt lookup only.
        self._drafts = drafts
        # Where the engine keeps chat prefixes warm across restarts; None keeps them in RAM only.
        self._prefix_cache_dir = str(prefix_cache_dir) if prefix_cache_dir else None
        # Where every engine writes its latest memory report for `tailor mem` (the user cache dir).
        self._status_dir = str(status_dir or AppPaths.default().engine_status)

    @property
    def profile(self) -> HardwareProfile:
        if self._profile is None:
            self._profile = detect_machine()
        return self._profile

    @property
    def machine(self) -> Machine:
        """The machine plans are made on: the profile's, less what `reserved` holds."""
        return Machine.from_profile(self.profile).without(self._reserved)

    def plan_load(self, path: str, settings: LoadSettings) -> PlannedLoad:
        """The request for `path`: a context of Auto becomes the plan's context (the engine always
        gets a number), or DEFAULT_N_CTX when there is no plan."""
        flash_attn, overruled = settings.resolved_flash_attn()
        kv_type = settings.kv_type
        if is_model_folder(path):
            return self._plan_folder(path, settings, flash_attn)
        try:
            candidate = gguf_file_candidate(path)
        except (InvalidModelFile, ValueError, OSError) as exc:
            # The engine checks the file again and sends the user-facing error.
            log.info("no plan for %s: %s", path, exc)
            return PlannedLoad(self._request(path, settings, None, kv_type=kv_type, flash_attn=flash_attn), None)
        found = self._found_draft(path, settings.speculation)
        if found is not None:
            settings = replace(settings, speculation=replace(settings.speculation, draft_path=str(found)))

        def plan_on(machine: Machine) -> Plan:
            return make_plan(machine, [candidate], context=settings.n_ctx, kv_type=kv_type, flash_attn=flash_attn,
                             auto_context_cap=settings.auto_ctx_cap)

        plan, draft_on_gpu = self._plan_with_draft(plan_on, settings.speculation)
        if settings.mmproj:
            plan = plan_with_projector(self.machine, plan_on, plan, settings.mmproj)
        if overruled:
            plan = replace(plan, reasons=(*plan.reasons, overruled))
        if found is not None:
            plan = replace(plan, reasons=(*plan.reasons, f"Speculative: Auto drafts with {found.name}, a smaller model "
                                                         "on disk with the same tokenizer, and from the conversation."))
        request = self._request(
            path, settings, plan, kv_type=plan.kv_type, flash_attn=plan.flash_attn, n_gpu_layers=plan.n_gpu_layers
        )
        # Over several GPUs, the split the forecast placed the layers by (not llama.cpp's own at load time).
        return PlannedLoad(replace(request, tensor_split=plan.tensor_split, draft_on_gpu=draft_on_gpu), plan,
                           context_refusal(plan, settings.n_ctx, candidate.shape.n_ctx_train))

    def _found_draft(self, path: str, speculation: SpeculativeOptions) -> Path | None:
        """A draft model from the library for Auto, when none was chosen."""
        if self._drafts is None or speculation.mode != "auto" or speculation.draft_path:
            return None
        return self._drafts.find(path)

    def _plan_with_draft(self, plan_on: PlanOn, speculation: SpeculativeOptions) -> tuple[Plan, bool | None]:
        """The model's plan on this machine, leaving room for a GGUF draft model when one is asked for;
        and whether the draft goes on the GPU (None: no draft planned, the engine's own rule)."""
        machine = self.machine
        draft = speculation.draft_path
        if speculation.mode not in ("draft", "auto") or not draft or is_model_folder(draft):
            return plan_on(machine), None
        try:
            candidate = gguf_file_candidate(draft)
        except (InvalidModelFile, ValueError, OSError) as exc:
            plan = plan_on(machine)
            return replace(plan, reasons=(*plan.reasons, f"Draft model {Path(draft).name}: not planned ({exc}).")), None
        return plan_with_draft(machine, plan_on, candidate, Path(draft).name)

    def _plan_folder(self, path: str, settings: LoadSettings, flash_attn: bool) -> PlannedLoad:
        """A Hugging Face folder: the PyTorch engine's plan (the KV type and GPU layers are its own)."""
        plan = None
        try:
            candidate = folder_candidate(path)
        except (InvalidModelFile, ValueError, OSError) as exc:
            log.info("no plan for %s: %s", path, exc)  # the engine checks the folder and says why
        else:
            plan = plan_folder(
                self.machine, candidate, settings.n_ctx,
                torch_ok=importlib.util.find_spec("torch") is not None,
                options=settings.torch, auto_context_cap=settings.auto_ctx_cap,
            )
        return PlannedLoad(self._request(path, settings, plan, kv_type=settings.kv_type, flash_attn=flash_attn), plan)

    def _request(
        self, path: str, settings: LoadSettings, plan: Plan | None, *, kv_type: KvType, flash_attn: bool,
        n_gpu_layers: int = 0,
    ) -> LoadRequest:
        """The LoadRequest of a load: how the plan (if any) says to load it, and the user's settings."""
        if plan is not None:
            n_ctx = plan.context
        elif settings.n_ctx is not None:
            n_ctx = settings.n_ctx
        else:
            log.info("context: auto needs a plan, and %s has none: loading with %d tokens", path, DEFAULT_N_CTX)
            n_ctx = DEFAULT_N_CTX
        return LoadRequest(
            path, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, kv_type=kv_type, flash_attn=flash_attn,
            swa_full=plan.swa_full if plan else True, prefix_cache_dir=self._prefix_cache_dir, status_dir=self._status_dir,
            forecast=plan.forecast.to_dict() if plan and plan.forecast else None,
            pinned_prompts=settings.pinned_prompts, speculation=settings.speculation,
            torch=settings.torch, n_parallel=settings.n_parallel, mmproj=settings.mmproj,
        )


def context_refusal(plan: Plan, asked: int | None, trained: int) -> str | None:
    """Why a context the user set (`asked`; None is Auto, which the plan sizes) must not be loaded: the plan
    says it does not fit, where a smaller one does (or the model was trained for less); None to load it.

    A context that fits is loaded even past the trained length (the plan notes it), as llama.cpp allows;
    a model that fits at no context is left to the engine (it may load with fewer GPU layers), unless the
    context is past the trained length too.
    """
    if asked is None or plan.fits:
        return None
    most = plan.max_context
    needs = f": it needs {gb(plan.forecast.total('total_bytes'))} of memory with this model" if plan.forecast else ""
    if most and asked > most:
        trained_too = ", the model's trained length" if most == trained else ""
        return f"A context of {asked:,} tokens does not fit here{needs}; the most that fits is {most:,} tokens{trained_too}."
    if not most and trained and asked > trained:
        return (f"A context of {asked:,} tokens does not fit here{needs}; the model was trained for {trained:,} tokens, "
                "and not even a short context fits.")
    return None

"""What the model picker lists and says, without Qt: the models on disk with each one's verdict for
this machine, the line of the model loaded now, and the words of a load's stages.

`models_on_disk` (app/services/library_models.py) and `choices` read folders and file headers: the picker
runs them on a pool thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.chat.model_state import file_name
from app.services.library_models import DiskModel, models_on_disk
from engine.protocol import ModelInfo
from models.formats.errors import InvalidModelFile
from models.formats.projector_header import ProjectorInfo, read_projector_info
from models.formats.projector_pairing import projector_beside
from models.formats.quant_levels import quant_from_name
from models.library import ModelStore
from models.plan.decision_tree import Plan

# What the stages of a load (engine.protocol.LoadStage) are called on the progress bar (short: the bar
# shares the chat's top row), and in its tooltip.
STAGE_WORDS = {"reading": "Reading", "offloading": "Offloading", "context": "Preparing"}
STAGE_TIPS = {
    "reading": "Reading the model's weights from its file",
    "offloading": "Reading the model's weights and copying its GPU layers to the GPU",
    "context": "The weights are in: making the KV cache and compute buffers for the context",
}


@dataclass(frozen=True, slots=True)
class Choice:
    """A model on disk with its verdict for this machine."""

    model: DiskModel
    verdict: str  # "fits on GPU", "partly on GPU (20/29 layers)", "CPU only", "too big", "cannot be read"; "": none
    fits: bool

    @property
    def text(self) -> str:
        return f"{self.model.label} — {self.verdict}" if self.verdict else self.model.label


def vision_models(store: ModelStore) -> list[str]:
    """The labels of the library's GGUF models with a projector beside them that fits and sees: the ones that
    see (headers read per file: run it off the GUI thread)."""
    return [label for label, info in _projectors(store) if info.has_vision]


def hearing_models(store: ModelStore) -> list[str]:
    """The labels of the library's GGUF models whose projector beside them takes audio that this llama.cpp runs
    (Qwen2-Audio's; one it would abort on is refused by its header): the ones that hear (headers read per
    file: run it off the GUI thread)."""
    return [label for label, info in _projectors(store) if info.audio is not None]


def _projectors(store: ModelStore) -> Iterator[tuple[str, ProjectorInfo]]:
    """Each library GGUF model with a projector beside it: its label, and what the projector takes."""
    for model in models_on_disk(store):
        projector = projector_beside(Path(model.path)) if model.path.lower().endswith(".gguf") else None
        if projector is None:
            continue
        try:
            yield model.label, read_projector_info(projector)
        except (InvalidModelFile, OSError):
            continue


def verdict(plan: Plan | None) -> tuple[str, bool]:
    """What a plan says of a model here, in a few words, and whether it fits."""
    if plan is None:
        return "cannot be read", False
    if not plan.fits:
        return "too big", False
    if plan.n_gpu_layers > plan.n_layers:
        return "fits on GPU", True
    if plan.n_gpu_layers > 0:
        return f"partly on GPU ({plan.n_gpu_layers}/{plan.n_layers} layers)", True
    return "CPU only", True


def choices(models: Iterable[DiskModel], plan_of: Callable[[str], Plan | None] | None) -> list[Choice]:
    """Each model with its verdict; a model whose plan fails is "cannot be read", the others still listed.
    No `plan_of` (a remote server's engine, which plans nothing here): no verdicts."""
    if plan_of is None:
        return [Choice(model, "", True) for model in models]
    out = []
    for model in models:
        try:
            plan = plan_of(model.path)
        except Exception:  # noqa: BLE001 - one unreadable file must not hide the rest of the library
            plan = None
        out.append(Choice(model, *verdict(plan)))
    return out


def where_text(plan: Plan | None) -> str:
    """Where a plan runs the model: "GPU · all 31 layers", "GPU 20/29 layers + CPU", "CPU"."""
    if plan is None:
        return ""
    if plan.n_gpu_layers > plan.n_layers:
        return f"GPU · all {plan.n_layers} layers"
    if plan.n_gpu_layers > 0:
        return f"GPU {plan.n_gpu_layers}/{plan.n_layers} layers + CPU"
    return "CPU"


def loaded_line(path: str, info: ModelInfo | None, plan: Plan | None) -> str:
    """The picker's line for the model loaded: its name, its quant (the plan's, else the file name's) and
    where it runs, e.g. "SmolLM2 135M Instruct · Q4_1 · CPU"."""
    if info is not None and info.architecture == "remote":
        return f"{info.name} · remote server"
    name = info.name if info is not None else file_name(path)
    quant = (plan.quant if plan is not None else None) or quant_from_name(file_name(path))
    where = where_text(plan)
    if info is not None and info.notice:  # loaded with fewer GPU layers than planned: the plan is not the truth
        where = "fewer GPU layers than planned"
    return " · ".join(part for part in (name, quant, where) if part)


def progress_text(fraction: float, stage: str) -> str:
    """The words on the progress bar: "Reading 45 %"."""
    return f"{STAGE_WORDS.get(stage, stage)} {round(fraction * 100)} %"

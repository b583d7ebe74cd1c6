"""What to download from a repo and how it fits this machine: shared by `tailor pull` and the window. No Qt.

    details = client.repo_details(repo_id)
    assessment = assess_repo(client, details, machine)      # a verdict per file group, the plan's pick
    request = build_request(client, details, with_extras(details, group), "main")
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, replace

from models.download.request import DownloadFile, DownloadRequest
from models.hub.client import HubClient, RepoDetails
from models.hub.repo_files import FileGroup, group_files
from models.plan.candidates import Candidate
from models.plan.context import AUTO_CONTEXT_CAP
from models.plan.decision_tree import Plan, make_plan
from models.plan.machine import Machine
from models.plan.sources import repo_candidates
from models.units import human_size

# Small files a safetensors checkpoint needs beside its weights.
CHECKPOINT_EXTRAS = (".json", ".txt", ".model", ".tiktoken", ".jinja")
# Groups a user can download and run (projector files are shown, but get no verdict).
_MODEL_FORMATS = ("gguf", "awq", "fp8", "gptq", "safetensors")


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def with_extras(details: RepoDetails, group: FileGroup, projector: str | None = None) -> tuple[str, ...]:
    """The group's files, plus the config/tokenizer files a safetensors checkpoint needs, or the projector a
    GGUF model of a vision repo sees through: `projector` where the caller chose it (GroupVerdict.projector,
    picked by fit), else `projector_for`'s pick by precision alone."""
    if group.format == "gguf":
        projector = projector or projector_for(details, group)
        return group.paths + ((projector,) if projector else ())
    if group.format == "mmproj":
        return group.paths
    extras = tuple(f.path for f in details.files if "/" not in f.path and f.path.endswith(CHECKPOINT_EXTRAS))
    return group.paths + tuple(p for p in extras if p not in group.paths)


# A projector's precision, most wanted first: the projector is small beside its model (Gemma 3's: 0.8 GB
# in F16, 0.6 GB in Q8_0) and what the model sees loses detail in a coarser one; Q8_0 where F16 is not there.
_PROJECTOR_PRECISION = ("F16", "BF16", "Q8_0", "F32")


Fits = Callable[[int], bool]  # whether a projector of so many bytes fits beside the model, costing it nothing


def projector_for(details: RepoDetails, model: FileGroup, fits: Fits | None = None) -> str | None:
    """The projector file to download with a GGUF model of `details`: one in the model's own folder (repos
    with a folder per quant keep one per folder), else at the repo's root; the most precise by
    _PROJECTOR_PRECISION that `fits` (F16 when it fits, else Q8_0...), the smallest when none does, or by
    precision alone without `fits`; None for a repo without one."""
    folder = model.paths[0].rpartition("/")[0]
    projectors = [g for g in group_files(details.files) if g.format == "mmproj" and g.complete]
    near = [g for g in projectors if g.paths[0].rpartition("/")[0] == folder] or \
        [g for g in projectors if "/" not in g.paths[0]]
    if not near:
        return None

    def rank(g: FileGroup) -> tuple[int, str]:
        quant = (g.quant or "").upper()
        return (_PROJECTOR_PRECISION.index(quant) if quant in _PROJECTOR_PRECISION else len(_PROJECTOR_PRECISION),
                g.name)

    ranked = sorted(near, key=rank)
    if fits is None:
        return ranked[0].paths[0]
    return next((g for g in ranked if fits(g.total_size)), min(ranked, key=lambda g: g.total_size)).paths[0]


def projector_fit(machine: Machine, plan_on: Callable[[Machine], Plan], alone: Plan) -> Fits:
    """`Fits` for a model whose plan on `machine` is `alone`: a projector fits when the model planned again
    with its bytes taken from the device it would go on (the GPU when any of the model's layers are there,
    as the engine places it; else the RAM) keeps every GPU layer and the context. The bytes are the file's
    (its weights, within a few KB); its compute buffer is counted once the header is read, at load."""
    on_gpu = alone.n_gpu_layers > 0 and machine.has_gpu

    def fits(size: int) -> bool:
        less = (replace(machine, gpu_free_bytes=max(0, machine.gpu_free_bytes - size)) if on_gpu else
                replace(machine, ram_available_bytes=max(0, machine.ram_available_bytes - size)))
        plan = plan_on(less)
        return plan.fits and plan.n_gpu_layers >= alone.n_gpu_layers and plan.context >= alone.context

    return fits


def download_file(client: HubClient, details: RepoDetails, path: str) -> DownloadFile:
    """The DownloadFile for one file of `details` (URL at the repo's commit, sha256, blob id)."""
    f = details.file(path)
    if f is None:
        raise ValueError(f"{details.id} has no file {path}")
    return DownloadFile(path, client.file_url(details.id, path, details.sha), f.size, f.sha256, f.sha256 or f.git_oid)


def build_request(client: HubClient, details: RepoDetails, paths: tuple[str, ...], revision: str) -> DownloadRequest:
    """A download of `paths` at the commit `details` was read at; `revision` is the ref to record."""
    return DownloadRequest(
        details.id,
        details.sha,
        tuple(download_file(client, details, p) for p in paths),
        ref=None if revision == details.sha else revision,
    )


@dataclass(slots=True, frozen=True)
class GroupVerdict:
    """One file group of a repo as this machine sees it.

    Attributes:
        group: The files.
        verdict: One short phrase ("fits fully on GPU at 4,096 context", "partial offload: 22/32
            layers", "CPU · fits in RAM", "too large"), or why there is none.
        recommended: The decision tree picks this group for this machine.
        plan: The plan for this group alone (None when it cannot be planned).
        reasons: Why: the whole tree's reasons for the recommended group, else this group's.
        projector: For a GGUF model of a vision repo, the projector downloaded with it (`projector_for`,
            picked by what fits beside this plan).
    """

    group: FileGroup
    verdict: str
    recommended: bool
    plan: Plan | None
    reasons: tuple[str, ...]
    projector: str | None = None


@dataclass(slots=True, frozen=True)
class RepoAssessment:
    details: RepoDetails
    groups: tuple[GroupVerdict, ...]
    plan: Plan | None  # the tree's pick over every candidate; None when nothing can be planned
    note: str | None = None  # why there are no verdicts (e.g. the header could not be read)

    @property
    def recommended(self) -> GroupVerdict | None:
        return next((g for g in self.groups if g.recommended), None)


def verdict_text(plan: Plan, machine: Machine) -> str:
    """The plan in a few words."""
    if not plan.fits:
        return "too large"
    if not machine.has_gpu or plan.n_gpu_layers == 0:
        return "CPU · fits in RAM"
    if plan.n_gpu_layers > plan.n_layers:
        return f"fits fully on GPU at {plan.context:,} context"
    return f"partial offload: {plan.n_gpu_layers}/{plan.n_layers} layers"


def assess_repo(client: HubClient, details: RepoDetails, machine: Machine, context: int | None = 4096,
                torch_ok: bool | None = None, kv_type: str = "f16",
                auto_context_cap: int = AUTO_CONTEXT_CAP) -> RepoAssessment:
    """A verdict for every file group of the repo, and the decision tree's pick.

    Reads one GGUF header over HTTP (see `repo_candidates`); `context` None is Context: Auto.

    Raises:
        HubError: the repo cannot be read (not found, gated, offline...).
    """
    candidates, note = read_candidates(client, details)
    return assess_candidates(details, candidates, machine, context, torch_ok, kv_type, auto_context_cap, note)


def read_candidates(client: HubClient, details: RepoDetails) -> tuple[list[Candidate], str | None]:
    """The repo's candidates (one header read over HTTP), or none and why.

    Raises:
        HubError: the repo cannot be read (not found, gated, offline...).
    """
    try:
        return repo_candidates(client, details.id, details.sha), None
    except (ValueError, OSError) as exc:  # InvalidModelFile is a ValueError
        return [], f"no verdicts: {exc}"


def assess_candidates(details: RepoDetails, candidates: list[Candidate], machine: Machine,
                      context: int | None = 4096, torch_ok: bool | None = None, kv_type: str = "f16",
                      auto_context_cap: int = AUTO_CONTEXT_CAP, note: str | None = None) -> RepoAssessment:
    """`assess_repo` for candidates already read: no network, so settings can change and re-plan."""
    torch_ok = torch_available() if torch_ok is None else torch_ok
    groups = group_files(details.files)

    def plan_of_on(on: Machine, chosen: list[Candidate]) -> Plan:
        return make_plan(on, chosen, context=context, kv_type=kv_type, torch_ok=torch_ok,
                         auto_context_cap=auto_context_cap)

    def plan_of(chosen: list[Candidate]) -> Plan:
        return plan_of_on(machine, chosen)

    best = plan_of(candidates) if candidates else None
    by_files: dict[tuple[str, ...], Candidate] = {c.files: c for c in candidates}
    out = []
    for group in groups:
        candidate = by_files.get(group.paths)
        if candidate is None:
            reason = _no_candidate_reason(group)
            out.append(GroupVerdict(group, reason, False, None, (reason,)))
            continue
        plan = plan_of([candidate])
        recommended = best is not None and best.files == group.paths
        reasons = best.reasons if recommended and best is not None else plan.reasons
        projector = None
        if group.format == "gguf":
            fits = projector_fit(machine, lambda m, c=candidate: plan_of_on(m, [c]), plan)
            projector = projector_for(details, group, fits)
            if projector is not None:
                reasons = (*reasons, _projector_reason(details, projector, plan, fits))
        out.append(GroupVerdict(group, verdict_text(plan, machine), recommended, plan, tuple(reasons), projector))
    if not candidates and note is None:
        note = "the repo has no GGUF, AWQ, GPTQ or FP8 model files"
    return RepoAssessment(details, tuple(out), best, note)


def _projector_reason(details: RepoDetails, projector: str, plan: Plan, fits: Fits) -> str:
    f = details.file(projector)
    size = f.size if f is not None else 0
    where = "the GPU" if plan.n_gpu_layers > 0 else "the RAM"
    why = (f"the most precise that fits in {where} beside this plan" if fits(size) else
           f"the smallest; none fits in {where} beside this plan without taking from it")
    return f"Projector {projector.rpartition('/')[2]} ({human_size(size)}) comes with it: {why}."


def _no_candidate_reason(group: FileGroup) -> str:
    if group.format == "mmproj":
        return "vision projector (used with a model file)"
    if not group.complete:
        return "incomplete split set"
    if group.format not in _MODEL_FORMATS:
        return "not a model file"
    return "not planned (no forecast for this format)"

"""A GGUF model of a vision repo is downloaded with its projector: the one in its folder, F16 first."""

from __future__ import annotations

from dataclasses import replace

from app.services.planning.pull_plan import assess_candidates, projector_for, with_extras
from models.hub.client import RepoDetails, RepoFile
from models.hub.repo_files import group_files
from models.plan.candidates import Candidate, gguf_candidates
from models.plan.forecast import ModelShape
from models.plan.machine import Machine
from models.units import GIB

GB = 10**9


def repo(*paths: str) -> RepoDetails:
    files = tuple(RepoFile(p, 1000 + i, f"{i:064x}", f"{i:040x}") for i, p in enumerate(paths))
    return RepoDetails("org/vision-GGUF", "a" * 40, files, False, False, None, None, ())


def group(details: RepoDetails, name: str):
    return next(g for g in group_files(details.files) if g.name == name)


def test_the_model_comes_with_the_f16_projector_else_the_q8_0():
    both = repo("gemma-3-4b-it-Q4_K_M.gguf", "mmproj-model-Q8_0.gguf", "mmproj-model-F16.gguf", "README.md")
    model = group(both, "gemma-3-4b-it-Q4_K_M.gguf")
    assert with_extras(both, model) == ("gemma-3-4b-it-Q4_K_M.gguf", "mmproj-model-F16.gguf")
    only_q8 = repo("gemma-3-4b-it-Q4_K_M.gguf", "gemma-3-4b-it-mmproj-Q8_0.gguf")
    assert projector_for(only_q8, group(only_q8, "gemma-3-4b-it-Q4_K_M.gguf")) == "gemma-3-4b-it-mmproj-Q8_0.gguf"


def test_a_folder_per_quant_takes_its_own_projector_and_a_text_repo_none():
    folders = repo("Q4_K_M/model-Q4_K_M.gguf", "Q4_K_M/mmproj-F16.gguf", "Q8_0/model-Q8_0.gguf", "Q8_0/mmproj-Q8_0.gguf")
    q8 = next(g for g in group_files(folders.files) if g.paths[0] == "Q8_0/model-Q8_0.gguf")
    assert projector_for(folders, q8) == "Q8_0/mmproj-Q8_0.gguf"
    text = repo("model-Q4_K_M.gguf", "model-Q8_0.gguf")
    assert with_extras(text, group(text, "model-Q4_K_M.gguf")) == ("model-Q4_K_M.gguf",)
    projector = group(both := repo("m-Q4_0.gguf", "mmproj-F16.gguf"), "mmproj-F16.gguf")
    assert with_extras(both, projector) == ("mmproj-F16.gguf",)  # a projector alone, when asked for alone


def _gemma_like_repo() -> tuple[RepoDetails, list[Candidate]]:
    """A 4B vision repo as the hub lists it: two quants, and its projector in F16 (0.85 GB) and Q8_0 (0.45 GB)."""
    sizes = {"gemma-3-4b-it-Q4_K_M.gguf": int(2.5 * GB), "gemma-3-4b-it-Q8_0.gguf": int(4.1 * GB),
             "mmproj-model-F16.gguf": int(0.85 * GB), "mmproj-model-Q8_0.gguf": int(0.45 * GB)}
    files = tuple(RepoFile(p, size, f"{i:064x}", f"{i:040x}") for i, (p, size) in enumerate(sizes.items()))
    details = RepoDetails("org/vision-GGUF", "a" * 40, files, False, False, None, None, ())
    layers, embd = 34, int(0.3 * GB)
    shape = ModelShape(
        n_layers=layers, n_embd=2560, n_heads=8, n_kv_heads=(4,) * layers, head_dim_k=256, head_dim_v=256,
        n_vocab=262144, n_ctx_train=131072, swa_layers=(False,) * layers, sliding_window=None,
        layer_weight_bytes=((int(8.0 * GB) - 2 * embd) // layers,) * layers, input_weight_bytes=embd,
        output_weight_bytes=embd)
    return details, gguf_candidates([(f.path, f.size) for f in files], shape)


def _gpu(free: int) -> Machine:
    return Machine("NVIDIA GeForce RTX 3060", free, 12 * GIB, (8, 6), 32 * GIB)


def _verdict(details: RepoDetails, candidates: list[Candidate], machine: Machine, name: str):
    assessment = assess_candidates(details, candidates, machine, context=4096, torch_ok=False)
    return next(g for g in assessment.groups if g.group.name == name)


def test_the_projector_is_the_most_precise_that_fits_beside_the_model_s_plan():
    details, candidates = _gemma_like_repo()
    roomy = _verdict(details, candidates, _gpu(11 * GIB), "gemma-3-4b-it-Q4_K_M.gguf")
    assert roomy.plan is not None and roomy.plan.n_gpu_layers > roomy.plan.n_layers  # all on the GPU, with room
    assert roomy.projector == "mmproj-model-F16.gguf"
    assert with_extras(details, roomy.group, roomy.projector)[-1] == "mmproj-model-F16.gguf"
    assert any("mmproj-model-F16.gguf" in r and "most precise that fits in the GPU" in r for r in roomy.reasons)

    # The least free memory that still holds the whole model: found from the plan, then 0.6 GB more than it
    # needs leaves room for the Q8_0 projector (0.45 GB) and not for the F16 one (0.85 GB).
    need = roomy.plan.forecast.devices["cuda:0"].total_bytes
    snug = _gpu(int(need / (1 - 0.02)) + int(0.6 * GB) + 2 * GIB)
    while _verdict(details, candidates, snug, "gemma-3-4b-it-Q4_K_M.gguf").projector == "mmproj-model-F16.gguf":
        snug = replace(snug, gpu_free_bytes=snug.gpu_free_bytes - 64 * 1024**2)
    tight = _verdict(details, candidates, snug, "gemma-3-4b-it-Q4_K_M.gguf")
    assert tight.plan.n_gpu_layers > tight.plan.n_layers and tight.plan.context == 4096  # the model alone still fits whole
    assert tight.projector == "mmproj-model-Q8_0.gguf"
    # ...and with a F16 projector's bytes taken it would not: that is why the Q8_0 was taken.
    alone = _verdict(details, candidates, replace(snug, gpu_free_bytes=snug.gpu_free_bytes - int(0.85 * GB)),
                     "gemma-3-4b-it-Q4_K_M.gguf")
    assert alone.plan.n_gpu_layers < tight.plan.n_gpu_layers or alone.plan.context < 4096 or not alone.plan.fits

    # Nothing fits beside it: the smallest, and the reason says so.
    full = _verdict(details, candidates, replace(snug, gpu_free_bytes=snug.gpu_free_bytes - int(0.5 * GB)),
                    "gemma-3-4b-it-Q4_K_M.gguf")
    assert full.projector == "mmproj-model-Q8_0.gguf"
    assert any("the smallest; none fits" in r for r in full.reasons)


def test_a_model_on_the_cpu_takes_its_projector_by_the_ram_left():
    details, candidates = _gemma_like_repo()
    cpu = _verdict(details, candidates, Machine(None, 0, 0, None, 16 * GIB), "gemma-3-4b-it-Q8_0.gguf")
    assert cpu.projector == "mmproj-model-F16.gguf"
    assert any("fits in the RAM" in r for r in cpu.reasons)

"""A GGUF model of a vision repo is downloaded with its projector: the one in its folder, F16 first."""

from __future__ import annotations

from app.services.planning.pull_plan import projector_for, with_extras
from models.hub.client import RepoDetails, RepoFile
from models.hub.repo_files import group_files


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

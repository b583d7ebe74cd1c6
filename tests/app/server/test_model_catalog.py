"""The names a request may give a model of the library (app/server/model_catalog.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.server.errors import ApiError
from app.server.model_catalog import ModelCatalog, names_of
from app.services.library_models import DiskModel

HUB = "/cache/models--bartowski--Qwen2.5-7B-Instruct-GGUF/snapshots/abc"


def test_a_hub_file_is_named_by_repo_and_file_and_answers_to_its_file_name_and_ollama_s_tag():
    model = DiskModel(f"{HUB}/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "", "bartowski/Qwen2.5-7B-Instruct-GGUF", "Q4_K_M")
    assert names_of(model) == ("bartowski/Qwen2.5-7B-Instruct-GGUF/Qwen2.5-7B-Instruct-Q4_K_M",
                               "Qwen2.5-7B-Instruct-Q4_K_M", "qwen2.5-7b-instruct-gguf:q4_k_m")
    assert names_of(DiskModel(f"{HUB}/sub", "", "org/Llama-AWQ")) == ("org/Llama-AWQ", "Llama-AWQ")
    assert names_of(DiskModel("/models/SmolLM2-135M-Instruct.Q4_1.gguf", "")) == ("SmolLM2-135M-Instruct.Q4_1",)


def test_an_alias_two_models_share_names_neither(tmp_path: Path):
    files = []
    for repo in ("a/Model-GGUF", "b/Model-GGUF"):
        path = tmp_path / repo.replace("/", "_") / "model-Q4_0.gguf"
        path.parent.mkdir()
        path.write_bytes(b"GGUF")
        files.append(DiskModel(str(path), "", repo, "Q4_0"))
    catalog = ModelCatalog(lambda: files)
    first, second = catalog.entries()
    assert first.names == ("a/Model-GGUF/model-Q4_0",) and second.names == ("b/Model-GGUF/model-Q4_0",)
    assert catalog.resolve("B/model-gguf/MODEL-q4_0") is second  # ids still name them, ignoring case
    with pytest.raises(ApiError) as ambiguous:
        catalog.resolve("model-Q4_0")
    assert ambiguous.value.status == 404 and "a/Model-GGUF/model-Q4_0" in ambiguous.value.message


def test_a_model_downloaded_since_the_listing_is_found_and_one_deleted_since_is_named(tmp_path: Path):
    on_disk: list[DiskModel] = []
    catalog = ModelCatalog(lambda: list(on_disk))
    with pytest.raises(ApiError, match="the library is empty"):
        catalog.resolve("late")
    late = tmp_path / "late.gguf"
    late.write_bytes(b"GGUF")
    on_disk.append(DiskModel(str(late), ""))
    assert catalog.resolve("late").model.path == str(late)  # no wait for the listing to go stale
    late.unlink()
    on_disk.clear()
    for _ in range(2):  # the first refusal reads the library again; the next still knows what was there
        with pytest.raises(ApiError, match="was deleted from the library") as gone:
            catalog.resolve("late")
        assert gone.value.status == 400

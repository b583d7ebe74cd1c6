"""A model opened by path finds its projector beside it: the mmproj*.gguf that fits it, never a wrong one."""

from __future__ import annotations

import os
from pathlib import Path

from models.formats.projector_pairing import is_projector_name, projector_beside
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


def model_in(folder: Path, starter_model: Path) -> Path:
    folder.mkdir(exist_ok=True)
    model = folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    model.symlink_to(starter_model)
    return model


def test_the_projector_that_fits_is_found_and_one_for_a_wider_model_is_not(tmp_path: Path, starter_model: Path):
    model = model_in(tmp_path / "repo", starter_model)
    assert projector_beside(model) is None  # a text model alone
    write_tiny_projector(model.parent / "mmproj-wide-F16.gguf", TinyProjectorSpec(n_embd_out=1152))
    assert projector_beside(model) is None  # made for another model: not taken
    fits = write_tiny_projector(model.parent / "mmproj-SmolVLM-F16.gguf", TinyProjectorSpec(projector_type="gemma3"))
    assert projector_beside(model) == fits


def test_broken_files_and_a_fifo_named_like_projectors_are_passed_over(tmp_path: Path, starter_model: Path):
    model = model_in(tmp_path / "repo", starter_model)
    (model.parent / "mmproj-empty.gguf").write_bytes(b"")
    (model.parent / "mmproj-text.gguf").write_bytes(b"GGUF" + b"\x00" * 60)
    os.mkfifo(model.parent / "mmproj-fifo.gguf")  # a read would wait for a writer forever
    (model.parent / "mmproj-folder.gguf").mkdir()
    assert projector_beside(model) is None
    fits = write_tiny_projector(model.parent / "mmproj-z.gguf", TinyProjectorSpec(projector_type="gemma3"))
    assert projector_beside(model) == fits


def test_a_projector_is_never_paired_with_itself_or_given_for_an_unreadable_model(tmp_path: Path):
    projector = write_tiny_projector(tmp_path / "mmproj-a.gguf", TinyProjectorSpec(projector_type="gemma3"))
    assert projector_beside(projector) is None
    assert projector_beside(tmp_path / "missing.gguf") is None
    assert is_projector_name("mmproj-model-f16.gguf") and is_projector_name("Qwen2.5-VL-7B-MMPROJ-Q8_0.GGUF")
    assert not is_projector_name("model-Q4_K_M.gguf") and not is_projector_name("mmproj.bin")

"""Projector files (mmproj-*.gguf) read without loading: what libmtmd will make of them, and what is refused."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import read_gguf_header
from models.formats.projector_header import (
    ImageTokens,
    NotAProjector,
    ProjectorMismatch,
    check_pairs_with,
    image_tokens,
    read_projector_info,
    text_model_width,
)
from tests.fixtures.model_files import truncated_copy
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("projectors")


def _write(folder: Path, name: str, **changes) -> Path:
    return write_tiny_projector(folder / name, dataclasses.replace(TinyProjectorSpec(), **changes))


def test_a_tiny_idefics3_projector_reads_as_clip_cpp_loads_it(folder: Path):
    path = _write(folder, "mmproj-tiny.gguf")
    info = read_projector_info(path)
    assert (info.projector_type, info.has_vision, info.has_audio, info.audio_projector_type) == ("idefics3", True, False, None)
    assert info.n_embd_out == 576  # mm.model.fc.weight's ne[1], as clip_n_mmproj_embd reads it
    assert (info.image_size, info.patch_size, info.merge, info.longest_edge) == (64, 8, 2, 64)
    assert (info.n_embd, info.n_layers) == (64, 2)
    assert info.tokens_per_tile == 16  # (64 / 8)² patches, 2 × 2 merged into one token
    header = read_gguf_header(path)
    assert set(info.weights_by_type) == {"F16", "F32"}
    assert info.weights_bytes == header.weights_bytes
    assert info.weights_by_type["F16"] == sum(t.nbytes for t in header.tensors if t.type_name == "F16")
    assert 0 < path.stat().st_size < 4 << 20


def test_an_idefics3_image_is_tiles_of_its_longest_edge_then_an_overview(folder: Path):
    info = read_projector_info(_write(folder, "mmproj-edge128.gguf", longest_edge=128))
    assert image_tokens(info, 64, 64) == ImageTokens((16, 16, 16, 16, 16))  # 128 × 128: 2 × 2 tiles + overview
    # 300 × 100 → 128 × 42 (the short side rounded up to even) → 2 × 1 tiles, then the overview
    assert image_tokens(info, 300, 100) == ImageTokens((16, 16, 16))
    assert image_tokens(info, 100, 300).total == 48
    # SmolVLM-256M's projector: 512-pixel tiles of 16-pixel patches, 4 × 4 merged: 64 tokens a tile, and
    # an image's longest side resized to 2048: a 1920 × 1080 picture is 4 × 3 tiles and the overview.
    smolvlm = dataclasses.replace(info, image_size=512, patch_size=16, merge=4, longest_edge=2048)
    assert smolvlm.tokens_per_tile == 64
    assert image_tokens(smolvlm, 1920, 1080) == ImageTokens((64,) * 13)


def test_an_older_idefics3_file_tiles_each_side_to_the_nearest_whole_tile(folder: Path):
    info = read_projector_info(_write(folder, "mmproj-old.gguf", longest_edge=None))
    assert info.longest_edge is None
    # 100 / 64 rounds to 2 columns, 300 / 64 to 5 rows (half away from zero, as C's round does)
    assert image_tokens(info, 100, 300).chunks == (16,) * 11
    assert image_tokens(info, 96, 10).chunks == (16,) * 3  # 1.5 → 2 columns; a side never under one tile


def test_a_gemma3_image_is_one_fixed_square(folder: Path):
    info = read_projector_info(_write(folder, "mmproj-gemma3.gguf", projector_type="gemma3"))
    assert (info.projector_type, info.n_embd_out, info.merge) == ("gemma3", 576, 2)
    assert image_tokens(info, 1000, 10) == image_tokens(info, 64, 64) == ImageTokens((16,))
    assert image_tokens(dataclasses.replace(info, image_size=896, patch_size=14, merge=4), 5, 5).total == 256


def test_an_image_of_no_pixels_is_refused(folder: Path):
    info = read_projector_info(_write(folder, "mmproj-tiny.gguf"))
    with pytest.raises(ValueError, match="0 × 10"):
        image_tokens(info, 0, 10)


def test_a_projector_for_a_wider_model_is_refused_by_name(folder: Path, starter_model: Path):
    info = read_projector_info(_write(folder, "mmproj-wide.gguf", n_embd_out=1152))
    width = text_model_width(read_gguf_header(starter_model))
    assert width == 576
    with pytest.raises(ProjectorMismatch) as refused:
        check_pairs_with(info, width)
    assert str(refused.value) == "projector gives 1152-wide embeddings, the model takes 576"
    check_pairs_with(read_projector_info(_write(folder, "mmproj-tiny.gguf")), width)  # the right one passes


def test_a_text_model_is_not_a_projector(starter_model: Path):
    with pytest.raises(NotAProjector) as refused:
        read_projector_info(starter_model)
    assert str(refused.value) == f"{starter_model.name} is not a vision projector (general.architecture is llama)"
    assert isinstance(refused.value, InvalidModelFile)  # caught where any bad model file is


def test_a_truncated_projector_is_refused(folder: Path):
    whole = _write(folder, "mmproj-whole.gguf")
    cut = truncated_copy(whole, folder / "mmproj-cut.gguf", fraction=0.6)
    with pytest.raises(InvalidModelFile, match="truncated"):
        read_projector_info(cut)


def test_a_file_that_is_no_gguf_is_refused(not_a_model: Path):
    with pytest.raises(InvalidModelFile):
        read_projector_info(not_a_model)


def test_values_llama_cpp_would_abort_on_are_refused_by_name(folder: Path):
    # idefics3's pixel shuffle asserts on a scale factor of 1 at the first image (the process dies)
    with pytest.raises(InvalidModelFile, match="scale_factor of 2 or more, not 1"):
        read_projector_info(_write(folder, "mmproj-merge1.gguf", merge=1))
    # a position embedding for another patch grid: ggml asserts when adding it
    spec = dataclasses.replace(TinyProjectorSpec(), patch_size=16)
    path = write_tiny_projector(folder / "mmproj-patch16.gguf", spec)
    with pytest.raises(InvalidModelFile, match="v.position_embd.weight"):
        read_projector_info(_rewritten(path, folder / "mmproj-badpos.gguf", "clip.vision.patch_size", 8))


def _rewritten(src: Path, dst: Path, key: str, value: int) -> Path:
    """`src` with one uint32 key's value changed in place (the header keeps its layout)."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    field = reader.fields[key]
    data = bytearray(src.read_bytes())
    offset = int(field.parts[field.data[0]].ctypes.data - reader.data.ctypes.data)
    data[offset : offset + 4] = value.to_bytes(4, "little")
    dst.write_bytes(bytes(data))
    return dst


def test_the_same_projector_reads_the_same(folder: Path):
    path = _write(folder, "mmproj-tiny.gguf")
    assert read_projector_info(path) == read_projector_info(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(
        _write(folder, "mmproj-again.gguf").read_bytes()).hexdigest()  # the fixture writes the same bytes each time

"""`tailor chat --image`: a message with pictures, through the installed command, the engine process and a
tiny projector beside the starter model (tests/fixtures/tiny_projector.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from tests.app.cli.test_chat_command import tailor
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


@pytest.fixture
def vision_model(tmp_path: Path, starter_model: Path) -> Path:
    """The starter model in a folder of its own, its projector beside it (as a hub download leaves them)."""
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / starter_model.name
    model.symlink_to(starter_model)
    write_tiny_projector(folder / "mmproj-SmolLM2-F16.gguf", TinyProjectorSpec(projector_type="gemma3"))
    return model


def picture(path: Path, colour: tuple[int, int, int]) -> Path:
    Image.new("RGB", (96, 64), colour).save(path)
    return path


def stats_of(stdout: str) -> dict:
    return json.loads(stdout.rstrip("\n").split("\n")[-1])


def test_an_image_goes_with_the_message_through_the_projector_beside_the_model(tmp_path: Path, vision_model: Path):
    red = picture(tmp_path / "red.png", (255, 0, 0))
    common = ("chat", "--model", str(vision_model), "--json", "--temperature", "0", "--max-tokens", "4")
    plain = tailor(*common, "What is this?", home=tmp_path)
    seen = tailor(*common, "--image", str(red), "What is this?", home=tmp_path)
    assert seen.returncode == 0, seen.stderr
    assert "seeing through mmproj-SmolLM2-F16.gguf" in seen.stderr
    # gemma3's projector: 16 positions for any picture, and the text around them
    assert stats_of(seen.stdout)["prompt_tokens"] >= stats_of(plain.stdout)["prompt_tokens"] + 16


def test_an_image_for_a_model_that_cannot_see_is_one_line_naming_the_model(tmp_path: Path, starter_model: Path,
                                                                          vision_model: Path):
    red = picture(tmp_path / "red.png", (255, 0, 0))
    for args in (("--model", str(starter_model)), ("--model", str(vision_model), "--mmproj", "none")):
        result = tailor("chat", *args, "--image", str(red), "What is this?", home=tmp_path)
        assert result.returncode == 1
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("tailor: error: ") and "cannot see images" in line and "--mmproj" in line


@pytest.mark.parametrize("which", ["fifo", "missing", "not an image", "bomb"])
def test_a_bad_image_is_refused_by_name_before_anything_loads(tmp_path: Path, vision_model: Path, which: str):
    path = tmp_path / {"fifo": "pipe.png", "missing": "gone.png", "not an image": "notes.png", "bomb": "bomb.png"}[which]
    if which == "fifo":
        os.mkfifo(path)
    elif which == "not an image":
        path.write_text("these are notes, not pixels")
    elif which == "bomb":
        # 20,000 × 20,000 pixels declared, a few hundred bytes on disk: refused by its header, never decoded
        Image.new("1", (20_000, 20_000)).save(path, optimize=True)
    result = tailor("chat", "--model", str(vision_model), "--image", str(path), "What is this?", home=tmp_path,
                    timeout=60)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"tailor: error: {path.name} ")
    assert "Traceback" not in result.stderr and result.stdout == ""

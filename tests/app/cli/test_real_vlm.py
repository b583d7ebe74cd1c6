"""A real vision model, where one is on disk, describes a test picture through `tailor chat --image`.

No vision model can be downloaded here, so the rest of the suite asserts the mechanics with tiny random
projectors. This test runs where a real one is: TAILOR_VLM_MODEL names its GGUF (SmolVLM-256M-Instruct's
Q8_0 from ggml-org/SmolVLM-256M-Instruct-GGUF is the smallest that answers), with its mmproj beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from tests.app.cli.test_chat_command import tailor

VLM = os.environ.get("TAILOR_VLM_MODEL")


@pytest.mark.vlm
def test_a_real_vision_model_sees_a_red_square(tmp_path: Path):
    if not VLM or not Path(VLM).is_file():
        pytest.skip("no real vision model: set TAILOR_VLM_MODEL to a GGUF with its mmproj beside it")
    picture = tmp_path / "square.png"
    image = Image.new("RGB", (256, 256), "white")
    image.paste((220, 20, 20), (64, 64, 192, 192))
    image.save(picture)
    result = tailor("chat", "--model", VLM, "--temperature", "0", "--max-tokens", "16", "--image", str(picture),
                    "What colour is the square in this picture? Answer in one word.", home=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "projector" in result.stderr.lower()  # the startup line names what the model sees through
    assert "red" in result.stdout.lower(), result.stdout

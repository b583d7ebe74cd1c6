"""`tailor chat --audio`: a message with a clip, through the installed command, the engine process and a tiny
Qwen2-Audio projector beside the starter model (tests/fixtures/tiny_audio_projector.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.app.cli.test_chat_command import tailor
from tests.app.cli.test_chat_images import picture, stats_of
from tests.app.services.media.sounds import pcm_wav, tone
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


def _beside(tmp_path: Path, starter_model: Path, folder_name: str) -> Path:
    folder = tmp_path / folder_name
    folder.mkdir()
    model = folder / starter_model.name
    model.symlink_to(starter_model)
    return model


@pytest.fixture
def audio_model(tmp_path: Path, starter_model: Path) -> Path:
    """The starter model in a folder of its own, an audio projector beside it (as a hub download leaves them)."""
    model = _beside(tmp_path, starter_model, "hears")
    write_tiny_audio_projector(model.parent / "mmproj-SmolLM2-audio-F16.gguf")
    return model


@pytest.fixture
def vision_model(tmp_path: Path, starter_model: Path) -> Path:
    model = _beside(tmp_path, starter_model, "sees")
    write_tiny_projector(model.parent / "mmproj-SmolLM2-F16.gguf", TinyProjectorSpec(projector_type="gemma3"))
    return model


def recording(path: Path, seconds: float = 2.0, rate: int = 44_100) -> Path:
    """A stereo 16-bit WAV at 44.1 kHz, as a phone or a desktop recorder writes one."""
    left, right = tone(seconds, rate, 440.0), tone(seconds, rate, 660.0, amplitude=0.25)
    path.write_bytes(pcm_wav(np.stack([left, right], axis=1), rate, 16))
    return path


def one_line(result, starts: str) -> str:
    assert result.returncode == 1 and result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"tailor: error: {starts}"), line
    return line


def test_a_clip_goes_with_the_message_through_the_projector_beside_the_model(tmp_path: Path, audio_model: Path):
    clip = recording(tmp_path / "question.wav")
    common = ("chat", "--model", str(audio_model), "--json", "--temperature", "0", "--max-tokens", "4")
    plain = tailor(*common, "What did I say?", home=tmp_path)
    heard = tailor(*common, "--audio", str(clip), "What did I say?", home=tmp_path)
    assert heard.returncode == 0, heard.stderr
    assert "hearing through mmproj-SmolLM2-audio-F16.gguf" in heard.stderr
    # one 30 s window of Qwen2-Audio: 750 positions, and the text around them
    assert stats_of(heard.stdout)["prompt_tokens"] >= stats_of(plain.stdout)["prompt_tokens"] + 750
    assert stats_of(heard.stdout)["gen_tokens"] > 0


def test_two_clips_go_in_order(tmp_path: Path, audio_model: Path):
    first, second = recording(tmp_path / "a.wav", 1.0), recording(tmp_path / "b.wav", 1.5, rate=16_000)
    result = tailor("chat", "--model", str(audio_model), "--json", "--temperature", "0", "--max-tokens", "2",
                    "--audio", str(first), "--audio", str(second), "Compare them.", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert stats_of(result.stdout)["prompt_tokens"] >= 2 * 750


def test_a_clip_for_a_model_that_cannot_hear_is_one_line_before_anything_loads(
        tmp_path: Path, starter_model: Path, vision_model: Path):
    clip = recording(tmp_path / "question.wav")
    line = one_line(tailor("chat", "--model", str(vision_model), "--audio", str(clip), "Hm?", home=tmp_path),
                    "mmproj-SmolLM2-F16.gguf takes no audio, only images")
    assert "--mmproj" in line
    for args in (("--model", str(starter_model)), ("--model", str(vision_model), "--mmproj", "none")):
        line = one_line(tailor("chat", *args, "--audio", str(clip), "Hm?", home=tmp_path), "")
        assert "cannot hear audio" in line and "--mmproj" in line
    assert not (tmp_path / "logs" / "engine.log").exists()  # no engine was started for any of them


def test_an_image_for_a_projector_that_only_hears_is_one_line(tmp_path: Path, audio_model: Path):
    red = picture(tmp_path / "red.png", (255, 0, 0))
    one_line(tailor("chat", "--model", str(audio_model), "--image", str(red), "What is this?", home=tmp_path),
             "mmproj-SmolLM2-audio-F16.gguf takes no images, only audio")


@pytest.mark.parametrize("which", ["fifo", "missing", "mp3", "truncated", "random bytes"])
def test_a_bad_clip_is_refused_by_name_before_anything_loads(tmp_path: Path, audio_model: Path, which: str):
    path = tmp_path / {"fifo": "pipe.wav", "missing": "gone.wav", "mp3": "talk.mp3", "truncated": "cut.wav",
                       "random bytes": "noise.wav"}[which]
    if which == "fifo":
        os.mkfifo(path)
    elif which == "mp3":
        path.write_bytes(b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(512))
    elif which == "truncated":
        whole = recording(tmp_path / "whole.wav").read_bytes()
        path.write_bytes(whole[: len(whole) // 3])
    elif which == "random bytes":
        path.write_bytes(np.random.default_rng(1).integers(0, 256, 2048, dtype=np.uint8).tobytes())
    result = tailor("chat", "--model", str(audio_model), "--audio", str(path), "Hm?", home=tmp_path, timeout=60)
    line = one_line(result, f"{path.name} ")
    if which == "mp3":
        assert "ffmpeg -i talk.mp3 talk.wav" in line
    assert not (tmp_path / "logs" / "engine.log").exists()


def test_audio_is_for_a_model_this_machine_loads(tmp_path: Path):
    clip = recording(tmp_path / "question.wav")
    one_line(tailor("chat", "--endpoint", "http://127.0.0.1:9", "--audio", str(clip), "Hm?", home=tmp_path),
             "--image, --audio and --mmproj are for a model this machine loads")

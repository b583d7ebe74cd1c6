"""Audio attached to the next message: dropped, pasted or chosen WAV files become chips (a sound icon, the name
and length, a remove button) beside the images, checked by their header (decoded when sent); MP3, FLAC and the rest are
refused by name with the command that converts them; a model that cannot hear says so, with the library's
models that can (their projectors read from disk)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import QMimeData, QUrl

from app.gui.composer.attachments import Attachments, clip_label
from app.gui.composer.media_attach import MediaAttach, deaf_notice
from app.gui.composer.message_box import Composer
from app.gui.model_picker.picker_list import hearing_models, vision_models
from app.services.media.intake import CheckedAudio
from models.library import ModelStore
from tests.app.gui.composer.test_attachments import picture
from tests.app.services.media.sounds import pcm_wav, tone
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

TIMEOUT_MS = 10_000


def recording(path: Path, seconds: float = 2.0, rate: int = 44_100, channels: int = 2) -> Path:
    wave = tone(seconds, rate)
    path.write_bytes(pcm_wav(np.stack([wave] * channels, axis=1) if channels > 1 else wave, rate, 16))
    return path


def test_dropped_wav_files_become_chips_beside_the_images_in_order(qtbot, tmp_path: Path):
    composer, strip = Composer(), Attachments()
    qtbot.addWidget(composer)
    qtbot.addWidget(strip)
    composer.files_given.connect(strip.add_files)
    voice, photo = recording(tmp_path / "voice.wav", 12.4), picture(tmp_path / "photo.png")
    memo = recording(tmp_path / "Memo.WAV", 0.5, rate=8_000, channels=1)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in (voice, photo, memo)])
    assert composer.canInsertFromMimeData(mime)
    composer.insertFromMimeData(mime)
    qtbot.waitUntil(lambda: len(strip.entries) == 3 and not strip.busy, timeout=TIMEOUT_MS)
    assert composer.toPlainText() == ""  # attached, not typed
    assert [c.name for c in strip.clips] == ["voice.wav", "Memo.WAV"] and [i.name for i in strip.images] == ["photo.png"]
    assert [type(e).__name__ for e in strip.entries] == ["_Chip", "_Thumb", "_Chip"]  # as they were given
    assert all(isinstance(c, CheckedAudio) for c in strip.clips)  # checked by their header, decoded when sent
    assert (strip.clips[1].source_rate, strip.clips[1].channels) == (8_000, 1)
    chip = strip.entries[0]
    assert chip.label.text() == clip_label(strip.clips[0]) == "voice.wav · 0:12"
    assert chip.icon.pixmap() is not None and not chip.icon.pixmap().isNull()  # the style's sound icon
    assert chip.body.toolTip() == "voice.wav · 0:12 · 44.1 kHz stereo"
    with qtbot.waitSignal(strip.changed, timeout=TIMEOUT_MS):
        chip.remove_button.click()
    assert [c.name for c in strip.clips] == ["Memo.WAV"] and len(strip.images) == 1


def test_pasted_bytes_of_a_wav_become_a_clip_and_of_an_image_a_thumbnail(qtbot, tmp_path: Path):
    strip = Attachments()
    qtbot.addWidget(strip)
    strip.add_bytes(recording(tmp_path / "x.wav").read_bytes(), "pasted audio.wav")
    strip.add_bytes(picture(tmp_path / "p.png").read_bytes(), "pasted image.png")
    qtbot.waitUntil(lambda: len(strip.entries) == 2, timeout=TIMEOUT_MS)
    assert [c.name for c in strip.clips] == ["pasted audio.wav"] and [i.name for i in strip.images] == ["pasted image.png"]


def test_compressed_audio_and_too_many_clips_are_refused_by_name(qtbot, tmp_path: Path):
    composer, strip = Composer(), Attachments(clip_limit=3)
    qtbot.addWidget(composer)
    qtbot.addWidget(strip)
    composer.files_given.connect(strip.add_files)
    refused: list[str] = []
    strip.refused.connect(refused.append)
    song = tmp_path / "song.mp3"
    song.write_bytes(b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * 64)
    flac = tmp_path / "take 2.flac"
    flac.write_bytes(b"fLaC" + b"\x00" * 60)
    pipe = tmp_path / "pipe.wav"
    os.mkfifo(pipe)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in (song, flac, pipe)])
    assert composer.canInsertFromMimeData(mime)
    composer.insertFromMimeData(mime)
    qtbot.waitUntil(lambda: len(refused) == 3 and not strip.busy, timeout=TIMEOUT_MS)
    assert strip.clips == () and composer.toPlainText() == ""
    mp3, flac_line, fifo = refused
    assert mp3.startswith("song.mp3 is an MP3 audio file: Tailor reads WAV audio; convert it first "
                          "(ffmpeg -i song.mp3 song.wav)")
    assert flac_line.startswith("take 2.flac is a FLAC audio file") and "ffmpeg -i 'take 2.flac'" in flac_line
    assert fifo.startswith("pipe.wav") and "FIFO" in fifo
    strip.add_files([recording(tmp_path / f"{i}.wav", 0.3) for i in range(4)])  # one more than the limit
    qtbot.waitUntil(lambda: len(strip.clips) == 3 and not strip.busy, timeout=TIMEOUT_MS)
    assert refused[-1] == "3.wav was not attached: a message carries at most 3 audio clips."


def _library(tmp_path: Path, starter_model: Path) -> ModelStore:
    """A library of three imported models: one with an audio projector beside it, one with a vision one, one
    with none (hard links of the starter model, each in a folder of its own)."""
    store = ModelStore(tmp_path / "data", cache_dir=tmp_path / "hub")
    for name, projector in (("listener", "audio"), ("viewer", "vision"), ("plain", None)):
        folder = tmp_path / name
        folder.mkdir()
        model = folder / f"{name}.gguf"
        os.link(starter_model, model)
        if projector == "audio":
            write_tiny_audio_projector(folder / "mmproj-F16.gguf")
        elif projector == "vision":
            write_tiny_projector(folder / "mmproj-F16.gguf", TinyProjectorSpec(projector_type="gemma3"))
        store.import_gguf(model)
    return store


def test_the_library_models_that_hear_are_those_whose_projector_takes_audio(tmp_path: Path, starter_model: Path):
    store = _library(tmp_path, starter_model)
    assert [label.split("/")[-1] for label in hearing_models(store)] == ["listener.gguf"]
    assert [label.split("/")[-1] for label in vision_models(store)] == ["viewer.gguf"]  # an ear is no eye


def test_a_model_that_cannot_hear_says_so_on_attach_and_names_the_models_that_can(qtbot, tmp_path: Path,
                                                                                 starter_model: Path):
    store = _library(tmp_path, starter_model)
    composer = Composer()
    qtbot.addWidget(composer)
    attach = MediaAttach(composer, lambda: True, lambda: "plain.gguf", lambda: [], hears=lambda: False,
                         hearing_models=lambda: hearing_models(store))
    qtbot.addWidget(attach.strip)  # the window places them; here they are closed with the test
    qtbot.addWidget(attach.button)
    notices: list[str] = []
    attach.notice.connect(notices.append)
    attach.add_files([picture(tmp_path / "a.png")])  # it sees: nothing to say
    attach.strip.wait()
    attach.wait()
    qtbot.wait(50)
    assert notices == []
    attach.add_files([recording(tmp_path / "q.wav")])
    qtbot.waitUntil(lambda: len(notices) == 1, timeout=TIMEOUT_MS)
    (notice,) = notices
    assert notice.startswith("plain.gguf cannot hear audio: it has no projector (mmproj) that takes audio.")
    assert "In your library these can: " in notice and "listener.gguf" in notice
    qtbot.waitUntil(lambda: len(attach.strip.clips) == 1, timeout=TIMEOUT_MS)  # attached all the same
    assert deaf_notice("m.gguf", []).endswith("from the Models window (Ctrl+M), e.g. a Qwen2-Audio GGUF.")

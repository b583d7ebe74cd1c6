"""Audio in the window, end to end: the starter model with a tiny Qwen2-Audio projector beside it, loaded by the
real engine; a WAV attached becomes a chip, goes with the message through libmtmd, is kept with the chat and
shown on the message as a chip; a model that cannot hear says so when a clip is attached."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt

from tests.app.gui.composer.test_attachments_audio import recording
from tests.app.gui.test_window import TIMEOUT_MS, messages
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector


def audio_model(tmp_path: Path, starter_model: Path) -> Path:
    folder = tmp_path / "hears"
    folder.mkdir()
    model = folder / "listener.gguf"
    os.link(starter_model, model)
    write_tiny_audio_projector(folder / "mmproj-listener-F16.gguf")
    return model


def test_an_attached_clip_goes_with_the_message_and_shows_on_it(qtbot, make_window, tmp_path, starter_model):
    window = make_window(model=audio_model(tmp_path, starter_model))
    assert window.session.model.hears_audio and window.session.model.audio_sample_rate == 16_000
    notices: list[str] = []
    window.media_attach.notice.connect(notices.append)
    window.media_attach.add_files([recording(tmp_path / "question.wav", 3.0)])
    strip = window.media_attach.strip
    qtbot.waitUntil(lambda: len(strip.clips) == 1 and not strip.busy, timeout=TIMEOUT_MS)
    assert strip.isVisible() and strip.entries[0].label.text() == "question.wav · 0:03"
    window.composer.setFocus()
    qtbot.keyClicks(window.composer, "What do you hear?")
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    reply = finished.args[0]
    assert reply.state == "complete" and reply.stats["prompt_tokens"] > 750  # the clip's window, and the text
    assert strip.clips == () and not strip.isVisible()
    user, _ = messages(window)
    assert [c.name for c in user.clips] == ["question.wav"] and round(user.clips[0].seconds) == 3
    assert window.session.store.media.read(user.clips[0].sha256) == (tmp_path / "question.wav").read_bytes()
    assert "question.wav · 0:03" in window.chat.plain_text()
    assert notices == []  # it hears: nothing to say


def test_a_model_that_cannot_hear_says_so_when_a_clip_is_attached(qtbot, window, tmp_path):
    assert not window.session.model.hears_audio
    notices: list[str] = []
    window.media_attach.notice.connect(notices.append)
    window.media_attach.add_files([recording(tmp_path / "q.wav")])
    qtbot.waitUntil(lambda: len(notices) == 1, timeout=TIMEOUT_MS)
    assert "cannot hear audio" in notices[0] and "None of your library's models can" in notices[0]
    assert window.attach_action.text() == "Attach images, audio or documents…"

"""The window runs a Hugging Face model folder (the PyTorch engine) the same way as a GGUF file."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.tiny_hf import write_tiny_model

TIMEOUT_MS = 120_000


def test_a_model_folder_loads_and_chats_in_the_window(qtbot, window, tmp_path: Path, monkeypatch):
    folder = tmp_path / "tiny-llama"
    write_tiny_model(folder, "llama")
    monkeypatch.setattr("app.gui.model_picker.picker.QFileDialog.getExistingDirectory", lambda *a, **k: str(folder))
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS) as loaded:
        window.open_folder_action.trigger()
    assert loaded.args[0].info.path == str(folder)
    assert "tiny-llama" in window.model_label.text()
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        window.submit("Hello there")
    reply = finished.args[0]
    assert reply.state == "complete", window.banner.text()
    assert reply.stats["gen_tokens"] > 0 and reply.stats["prompt_tokens"] > 0
    assert window.open_folder_action.shortcut().toString() == "Ctrl+Shift+O"

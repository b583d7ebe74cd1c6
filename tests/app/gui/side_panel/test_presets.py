"""Presets in the window: apply, save, delete; pinned ones are prefilled when the model loads."""

from __future__ import annotations

from PySide6.QtWidgets import QDialogButtonBox

from app.services.history.store import DEFAULT_PRESET, Preset

TIMEOUT_MS = 120_000


def test_the_pinned_default_preset_makes_the_first_reply_start_from_cache(qtbot, window):
    """The built-in preset is pinned: its system prompt is in the KV cache before the first message."""
    assert window.session.current.settings.system_prompt == DEFAULT_PRESET.system_prompt
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        window.submit("What is the capital of France?")
    stats = finished.args[0].stats
    assert stats["cached_tokens"] >= 10  # the system turn of the chat template, prefilled at load
    assert "from cache" in window.stats_label.text()


def test_choosing_saving_and_deleting_presets(qtbot, window):
    panel, store = window.settings_panel, window.session.store
    store.save_preset(Preset("pirate", "You talk like a pirate.", temperature=1.1, top_p=0.9, max_tokens=77))
    panel.set_presets(store.list_presets())
    names = [panel.preset.itemText(i) for i in range(panel.preset.count())]
    assert names == ["Choose a preset…", "pirate", "Tailor (pinned)"]
    with qtbot.waitSignal(panel.settings_changed):
        panel.preset.activated.emit(1)
    settings = window.session.current.settings
    assert (settings.system_prompt, settings.temperature, settings.max_tokens) == ("You talk like a pirate.", 1.1, 77)
    assert panel.system_prompt.toPlainText() == "You talk like a pirate."

    panel.system_prompt.setPlainText("You answer in haiku.")
    dialog = panel.ask_save_preset()
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert not save.isEnabled()  # no name yet
    qtbot.keyClicks(dialog.name, "haiku")
    dialog.pinned.setChecked(False)
    save.click()
    assert store.get_preset("haiku") == Preset("haiku", "You answer in haiku.", 1.1, 0.9, 77, pinned=False)
    assert "haiku" in [panel.preset.itemText(i) for i in range(panel.preset.count())]
    assert "saved" in window.statusBar().currentMessage()

    panel.preset.setCurrentIndex([panel.preset.itemText(i) for i in range(panel.preset.count())].index("haiku"))
    panel.delete_preset.click()
    assert store.get_preset("haiku") is None
    assert "haiku" not in [panel.preset.itemText(i) for i in range(panel.preset.count())]

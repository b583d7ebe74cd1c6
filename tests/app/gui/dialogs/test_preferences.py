"""Preferences: kept in the settings file, shown again by a new dialog, theme and font applied at once,
the models folder at the next start, and new chats starting with the preferred context and KV type."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialogButtonBox

from app.gui.common.app_settings import app_settings
from app.gui.common.theme import is_dark, system_font
from app.gui.dialogs.preferences import (
    MODELS_ENV,
    Preferences,
    PreferencesDialog,
    apply_models_dir,
    new_chat_defaults,
)
from app.services.history.store import ChatSettings
from app.services.load_settings import LoadSettings
from tests.app.conftest import with_load
from tests.app.gui import theme_fixtures

app = theme_fixtures.app


@pytest.fixture
def settings(tmp_path: Path) -> QSettings:
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def make_dialog(qtbot, settings: QSettings, answer: str = "") -> PreferencesDialog:
    dialog = PreferencesDialog(settings, choose_folder=lambda _parent, _start: answer)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def press(dialog: PreferencesDialog, which: QDialogButtonBox.StandardButton) -> None:
    dialog.buttons.button(which).click()


def test_preferences_persist_across_a_new_dialog(qtbot, app, settings, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    dialog = make_dialog(qtbot, settings, answer=str(models))
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    dialog.font_size.setValue(14)
    dialog.new_chats.setChecked(True)
    dialog.n_ctx.set_context(8192)
    dialog.kv_type.setCurrentText("q8_0")
    dialog.choose_button.click()
    press(dialog, QDialogButtonBox.StandardButton.Ok)
    assert not dialog.isVisible()

    # Read back through another QSettings over the same file: what a new start sees.
    again = make_dialog(qtbot, QSettings(settings.fileName(), QSettings.Format.IniFormat))
    assert again.preferences() == Preferences("dark", 14, True, LoadSettings(8192, "q8_0"), str(models))
    assert again.theme.currentText() == "Dark" and again.kv_type.currentText() == "q8_0"
    assert again.n_ctx.isEnabled()


def test_cancel_keeps_what_was_saved(qtbot, app, settings):
    dialog = make_dialog(qtbot, settings)
    dialog.font_size.setValue(20)
    press(dialog, QDialogButtonBox.StandardButton.Cancel)
    assert Preferences.load(settings).font_size == 0
    assert make_dialog(qtbot, settings).font_size.value() == 0


def test_apply_shows_the_theme_and_font_size_at_once(qtbot, app, settings):
    dialog = make_dialog(qtbot, settings)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    dialog.font_size.setValue(13)
    press(dialog, QDialogButtonBox.StandardButton.Apply)
    assert is_dark(app.palette()) and app.font().pointSizeF() == 13
    assert dialog.isVisible(), "Apply keeps the dialog open"
    dialog.theme.setCurrentIndex(dialog.theme.findData("light"))
    dialog.font_size.setValue(0)
    press(dialog, QDialogButtonBox.StandardButton.Apply)
    assert not is_dark(app.palette()) and app.font().pointSizeF() == system_font().pointSizeF()
    assert dialog.font_size.text().startswith("Same as the system")


def test_unreadable_values_fall_back_to_the_defaults(settings):
    settings.setValue("preferences/theme", "purple")
    settings.setValue("preferences/new_chat_kv_type", "q2_k")
    settings.setValue("preferences/font_size", -3)
    assert Preferences.load(settings) == Preferences()


def test_new_chats_copy_the_open_chat_until_the_preferences_say_otherwise(settings):
    base = ChatSettings(temperature=0.2, load=LoadSettings(n_ctx=2048, kv_type="q4_0"))
    assert new_chat_defaults(settings, base) == base
    assert new_chat_defaults(settings) == ChatSettings()
    Preferences(new_chats=True, new_chat_load=LoadSettings(n_ctx=16384, kv_type="q8_0")).save(settings)
    assert new_chat_defaults(settings, base) == with_load(base, n_ctx=16384, kv_type="q8_0")
    Preferences(new_chats=True, new_chat_load=LoadSettings(n_ctx=None, kv_type="f16")).save(settings)
    chat = new_chat_defaults(settings, base)
    assert chat.load.n_ctx is None and chat.load.kv_type == "f16" and chat.temperature == 0.2
    assert new_chat_defaults(settings, base) is not base


def test_the_models_folder_is_handed_to_the_hub_cache(settings, tmp_path):
    environ: dict[str, str] = {}
    assert apply_models_dir(settings, environ) is None and environ == {}
    Preferences(models_dir=str(tmp_path / "new-folder")).save(settings)  # its parent is there: made on use
    assert apply_models_dir(settings, environ) == tmp_path / "new-folder"
    assert environ[MODELS_ENV] == str(tmp_path / "new-folder")


def test_a_models_folder_that_is_gone_leaves_the_standard_cache(settings, tmp_path):
    environ: dict[str, str] = {}
    Preferences(models_dir=str(tmp_path / "unplugged" / "drive" / "models")).save(settings)
    assert apply_models_dir(settings, environ) is None and MODELS_ENV not in environ


def test_the_dialog_says_a_new_models_folder_applies_after_a_restart(qtbot, app, settings, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "in-use"))
    dialog = make_dialog(qtbot, settings, answer=str(tmp_path / "elsewhere"))
    assert str(tmp_path / "in-use") in dialog.models_note.text()
    assert "restart" not in dialog.models_note.text()
    assert not dialog.default_button.isEnabled()
    dialog.choose_button.click()
    assert dialog.models_dir.text() == str(tmp_path / "elsewhere")
    assert "applies after a restart" in dialog.models_note.text()
    dialog.default_button.click()
    assert dialog.preferences().models_dir == ""


def test_the_chat_menu_opens_preferences(qtbot, app, make_window):
    window = make_window(start=False)
    action = window.preferences_action
    chat_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Chat")
    assert action in chat_menu.actions()
    assert action.shortcut() == QKeySequence("Ctrl+,")
    action.trigger()
    dialog = window.findChild(PreferencesDialog)
    assert dialog is not None and dialog.isVisible()
    action.trigger()
    assert len(window.findChildren(PreferencesDialog)) == 1, "the open one comes to the front"
    dialog.new_chats.setChecked(True)
    dialog.n_ctx.set_context(4096)
    dialog.kv_type.setCurrentText("q8_0")
    press(dialog, QDialogButtonBox.StandardButton.Ok)
    assert Preferences.load(app_settings()).new_chat_load.n_ctx == 4096, "saved where the window's settings are"


def test_new_chats_of_the_window_take_the_preferences(qtbot, app, make_window):
    window = make_window(start=False)  # its chat: 2,048 tokens, f16 (conftest's QUICK)
    assert window.session.new_conversation().settings.load.n_ctx == 2048, "no preference: as the open chat"
    Preferences(new_chats=True, new_chat_load=LoadSettings(n_ctx=4096, kv_type="q8_0")).save(app_settings())
    chat = window.session.new_conversation()
    assert (chat.settings.load.n_ctx, chat.settings.load.kv_type) == (4096, "q8_0")
    assert chat.settings.max_tokens == 24, "the rest is the open chat's"

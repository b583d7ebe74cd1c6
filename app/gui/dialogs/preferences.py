"""Preferences (Chat → Preferences…, Ctrl+,): theme, font size, what new chats start with, and where
models are kept. Stored in the window's QSettings (common/app_settings.py); theme and font apply at
once, the models folder at the next start (it is read by everything that opens the hub cache).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import get_args

from PySide6.QtCore import QSettings, Qt, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.app_settings import app_settings
from app.gui.common.context_box import ContextBox
from app.gui.common.theme import THEMES, Theme, ThemeFollower, install_theme, system_font
from app.services.history.store import ChatSettings
from app.services.load_settings import LoadSettings
from models.hub.cache import hub_cache_dir
from models.plan.load_options import KvType

KV_TYPES: tuple[KvType, ...] = get_args(KvType)
# The hub cache folder every part of Tailor (and huggingface_hub, and the engine process) reads.
MODELS_ENV = "HF_HUB_CACHE"
_PREFIX = "preferences/"
_THEME_NAMES = {"system": "Same as the system", "light": "Light", "dark": "Dark"}
_log = logging.getLogger(__name__)
FolderChooser = Callable[[QWidget, str], str]
_APPLIED: Path | None = None  # the models folder this run took from the preferences


@dataclass(slots=True)
class Preferences:
    """What the dialog sets.

    Attributes:
        theme: "system" follows the desktop's dark or light scheme; "light" and "dark" override it.
        font_size: the application font in points; 0 is the desktop's own size (and follows it).
        new_chats: whether a new chat starts with the context and KV cache type of `new_chat_load` (else
            it copies the open chat's).
        new_chat_load: a new chat's context and KV cache type (its other load settings are the open chat's).
        models_dir: the Hugging Face cache folder to use from the next start; "" is the standard one.
    """

    theme: Theme = "system"
    font_size: int = 0
    new_chats: bool = False
    new_chat_load: LoadSettings = LoadSettings()  # n_ctx None: Auto
    models_dir: str = ""

    @classmethod
    def load(cls, settings: QSettings) -> Preferences:
        def value(key: str, default: object, kind: type) -> object:
            return settings.value(_PREFIX + key, default, type=kind)

        theme = str(value("theme", "system", str))
        kv_type = str(value("new_chat_kv_type", "f16", str))
        n_ctx = int(value("new_chat_n_ctx", 0, int))
        load = LoadSettings(n_ctx=n_ctx if n_ctx > 0 else None,
                            kv_type=kv_type if kv_type in KV_TYPES else "f16")  # type: ignore[arg-type]
        return cls(theme=theme if theme in THEMES else "system",  # type: ignore[arg-type]
                   font_size=max(0, int(value("font_size", 0, int))),
                   new_chats=bool(value("new_chats", False, bool)),
                   new_chat_load=load,
                   models_dir=str(value("models_dir", "", str)))

    def save(self, settings: QSettings) -> None:
        values = {"theme": self.theme, "font_size": self.font_size, "new_chats": self.new_chats,
                  "new_chat_n_ctx": self.new_chat_load.n_ctx or 0, "new_chat_kv_type": self.new_chat_load.kv_type,
                  "models_dir": self.models_dir}
        for key, value in values.items():
            settings.setValue(_PREFIX + key, value)
        settings.sync()


def new_chat_defaults(settings: QSettings, base: ChatSettings | None = None) -> ChatSettings:
    """The settings a new chat starts with: `base` (the open chat's, else the defaults), with the
    context and KV cache type of the preferences when the user asked new chats to take them."""
    prefs = Preferences.load(settings)
    start = replace(base) if base is not None else ChatSettings()
    if not prefs.new_chats:
        return start
    # The two a preference sets; the rest of the load (Auto's cap, flash attention, speculation…) is `base`'s.
    preferred = prefs.new_chat_load
    return replace(start, load=replace(start.load, n_ctx=preferred.n_ctx, kv_type=preferred.kv_type))


def apply_models_dir(settings: QSettings, environ: MutableMapping[str, str] = os.environ) -> Path | None:
    """Point the hub cache at the chosen folder (for this process and the engine it starts), or
    leave it as the environment says; returns the folder set. Done before anything opens the cache."""
    folder = Preferences.load(settings).models_dir
    if not folder:
        return None
    path = Path(folder).expanduser()
    if not path.is_dir() and not path.parent.is_dir():
        # e.g. an unplugged drive: models go to the standard cache rather than to a bare mount point.
        _log.warning("The models folder %s is not there; using %s", path, hub_cache_dir())
        return None
    global _APPLIED
    environ[MODELS_ENV] = str(path)
    if environ is os.environ:  # this run's folder (the dialog says when a new one awaits a restart)
        _APPLIED = path
    return path


def apply_preferences_at_start(app: QApplication, settings: QSettings) -> ThemeFollower:
    """Theme, font size and models folder of the preferences, before the window is built."""
    prefs = Preferences.load(settings)
    apply_models_dir(settings)
    return install_theme(app, prefs.theme, prefs.font_size)


def _choose_folder(parent: QWidget, start: str) -> str:
    return QFileDialog.getExistingDirectory(parent, "Where models are kept", start)


class PreferencesDialog(QDialog):
    """The preferences; OK and Apply save them and show the theme and font size at once.

    Args:
        settings: where they are kept (default: `app_settings()`).
        parent: the main window.
        choose_folder: asks for the models folder (default: a folder dialog); tests answer it.
    """

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None,
                 choose_folder: FolderChooser = _choose_folder):
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.settings = settings if settings is not None else app_settings()
        self._choose_folder = choose_folder
        self.theme = QComboBox()
        for theme in THEMES:
            self.theme.addItem(_THEME_NAMES[theme], theme)
        self.theme.setToolTip("Same as the system follows the desktop's dark or light setting as it changes.")
        self.font_size = QSpinBox(minimum=0, maximum=32, suffix=" pt")
        # 0 is the desktop's size: text then grows and shrinks with the system's font setting.
        self.font_size.setSpecialValueText(f"Same as the system ({system_font().pointSize()} pt)")
        self.font_size.setToolTip("The size of all text in Tailor's windows.")
        self.new_chats = QCheckBox("Start new chats with this context and KV cache")
        self.new_chats.setToolTip("Otherwise a new chat copies the settings of the chat that is open.")
        self.n_ctx = ContextBox()
        self.kv_type = QComboBox()
        self.kv_type.addItems(KV_TYPES)
        self.kv_type.setToolTip("KV cache type: q8_0 halves its memory, q4_0 quarters it.")
        self.models_dir = QLineEdit(readOnly=True)
        self.models_dir.setAccessibleName("Models folder")
        self.choose_button = QPushButton("Choose…")
        self.default_button = QPushButton("Standard folder")
        self.models_note = QLabel(wordWrap=True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
                                        | QDialogButtonBox.StandardButton.Apply)
        self._lay_out()
        self.new_chats.toggled.connect(self._enable_new_chat_boxes)
        self.choose_button.clicked.connect(self.choose_models_dir)
        self.default_button.clicked.connect(lambda: self.set_models_dir(""))
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.buttons.button(QDialogButtonBox.StandardButton.Apply).clicked.connect(self.apply)
        self.show_preferences(Preferences.load(self.settings))

    def _lay_out(self) -> None:
        look = QFormLayout()
        look.addRow("Theme", self.theme)
        look.addRow("Font size", self.font_size)
        chats = QFormLayout()
        chats.addRow(self.new_chats)
        chats.addRow("Context", self.n_ctx)
        chats.addRow("KV cache", self.kv_type)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.models_dir, 1)
        folder_row.addWidget(self.choose_button)
        folder_row.addWidget(self.default_button)
        models = QVBoxLayout()
        models.addLayout(folder_row)
        models.addWidget(self.models_note)
        layout = QVBoxLayout(self)
        for title, inner in (("Appearance", look), ("New chats", chats), ("Where models are kept", models)):
            box = QGroupBox(title)
            box.setLayout(inner)
            layout.addWidget(box)
        layout.addStretch(1)
        layout.addWidget(self.buttons)
        self.setMinimumWidth(self.fontMetrics().averageCharWidth() * 70)  # room for a long folder path

    # ------------------------------------------------------------ values

    def show_preferences(self, prefs: Preferences) -> None:
        self.theme.setCurrentIndex(max(self.theme.findData(prefs.theme), 0))
        self.font_size.setValue(prefs.font_size)
        self.new_chats.setChecked(prefs.new_chats)
        self.n_ctx.set_context(prefs.new_chat_load.n_ctx)
        self.kv_type.setCurrentText(prefs.new_chat_load.kv_type)
        self._enable_new_chat_boxes(prefs.new_chats)
        self.set_models_dir(prefs.models_dir)

    def preferences(self) -> Preferences:
        """What the dialog shows now."""
        load = LoadSettings(n_ctx=self.n_ctx.context(), kv_type=self.kv_type.currentText())  # type: ignore[arg-type]
        return Preferences(theme=self.theme.currentData(), font_size=self.font_size.value(),
                           new_chats=self.new_chats.isChecked(), new_chat_load=load, models_dir=self._models_dir)

    def set_models_dir(self, folder: str) -> None:
        """Show `folder` ("" for the standard one) and say when it takes effect."""
        self._models_dir = folder
        in_use = hub_cache_dir()
        self.models_dir.setText(folder or "Standard Hugging Face cache")
        self.models_dir.setToolTip(folder or "HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub")
        self.default_button.setEnabled(bool(folder))
        # What this run uses differs from the choice: say so, since only the next start reads it.
        from_choice = in_use == _APPLIED  # this run's folder came from the preferences
        changed = Path(folder).expanduser() != in_use if folder else from_choice
        note = f"In use now: {in_use}. Other tools that use the Hugging Face cache see the same models."
        if changed:
            note += " The new folder applies after a restart of Tailor; models already downloaded stay where they are."
        self.models_note.setText(note)

    @Slot()
    def choose_models_dir(self) -> None:
        folder = self._choose_folder(self, self._models_dir or str(hub_cache_dir()))
        if folder:
            self.set_models_dir(folder)

    def _enable_new_chat_boxes(self, on: bool) -> None:
        self.n_ctx.setEnabled(on)
        self.kv_type.setEnabled(on)

    # ------------------------------------------------------------ saving

    @Slot()
    def apply(self) -> None:
        """Save; show the theme and font size now (the models folder waits for a restart)."""
        prefs = self.preferences()
        prefs.save(self.settings)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            install_theme(app, prefs.theme, prefs.font_size)
        self.set_models_dir(prefs.models_dir)

    def accept(self) -> None:
        self.apply()
        super().accept()


def open_preferences(window: QWidget, settings: QSettings | None = None) -> PreferencesDialog:
    """Show the window's Preferences (the open one again, if there is one)."""
    dialog = window.findChild(PreferencesDialog)
    if dialog is None:
        dialog = PreferencesDialog(settings, window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog


def preferences_action(parent: QWidget, settings: QSettings) -> QAction:
    """Preferences… (Ctrl+,): opens the Preferences over `parent` (the open one again, if there is one)."""
    action = QAction("Preferences…", parent, shortcut=QKeySequence("Ctrl+,"))
    action.setMenuRole(QAction.MenuRole.PreferencesRole)  # macOS moves it to the application menu
    action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    action.triggered.connect(lambda: open_preferences(parent, settings))
    return action

"""The "Save as preset" dialog: a name and whether the preset is pinned."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QLineEdit, QWidget

from app.services.history.store import ChatSettings, Preset


class PresetDialog(QDialog):
    """Asks for a preset's name and pin; `preset()` builds it from the chat's settings.

    Args:
        settings: the settings the preset is made from.
        names: presets that exist (saving under one of them replaces it).
        parent: the Qt parent.
    """

    def __init__(self, settings: ChatSettings, names: list[str], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Save as preset")
        self._settings = settings
        self._names = names
        self.name = QLineEdit()
        self.name.setPlaceholderText("e.g. Python helper")
        self.pinned = QCheckBox("Pin: prefill this system prompt when a model loads")
        self.pinned.setToolTip("New chats with this preset start without waiting for the system prompt.")
        self.pinned.setChecked(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Name", self.name)
        form.addRow("", self.pinned)
        form.addRow(self.buttons)
        self.name.textChanged.connect(self._check)
        self._check()

    def _check(self) -> None:
        name = self.name.text().strip()
        save = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        save.setEnabled(bool(name))
        save.setText("Replace" if name in self._names else "Save")

    def preset(self) -> Preset:
        s = self._settings
        return Preset(
            self.name.text().strip(), s.system_prompt, s.temperature, s.top_p, s.max_tokens, self.pinned.isChecked()
        )

"""SpeculationGroup: a chat's speculative decoding, for either engine (a GGUF file or a model folder).

The mode and the draft model: a .gguf file for a GGUF model, a model folder for the PyTorch
engine. Each change reloads the model before the next reply, like the context length does
(app/chat/load_settings.py).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from app.gui.common.theme import set_tone
from app.services.history.store import ChatSettings
from models.plan.folder_plan import is_model_folder
from models.plan.load_options import SpeculativeOptions

# (value of SpeculativeOptions.mode, label, what it does)
SPECULATIVE = (
    ("auto", "Auto", "Drafts only where it pays (measured as the reply goes): from the conversation, and with a "
                     "draft model — the one chosen, or a smaller one with the same tokenizer in your library."),
    ("off", "Off", "One token per step of the model."),
    ("lookup", "Prompt lookup",
     "Guesses the next tokens by finding the last few in the prompt: fast when the reply repeats it "
     "(rewrites, code edits). Needs no other model."),
    ("draft", "Draft model",
     "A smaller model with exactly this model's tokenizer guesses the next tokens; choose it below."),
)
NO_DRAFT_HINT = "Choose the draft model: until then the model cannot load with a draft."


class SpeculationGroup(QGroupBox):
    """The speculative decoding mode and the draft model, shown for every model.

    Args:
        parent: the Qt parent.

    Signals:
        changed(): the user changed a setting (not sent by `set_values`).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Speculative decoding", parent)
        self.setToolTip("Cheap guesses of the next tokens, checked by the model in one step: the reply is the "
                        "same, and comes faster when the guesses are right. Each change reloads the model.")
        self.speculative = QComboBox()
        for i, (value, label, tip) in enumerate(SPECULATIVE):
            self.speculative.addItem(label, value)
            self.speculative.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        self.speculative.setToolTip(
            "Speculative decoding: cheap guesses of the next tokens, checked by the model in one step. "
            "The reply is the same; it comes faster when the guesses are right. Reloads the model."
        )
        self.draft_path = QLineEdit(readOnly=True, placeholderText="No draft model chosen")
        self.browse = QPushButton("Browse…")
        self.message = QLabel(wordWrap=True)
        set_tone(self.message, "error")
        self.message.hide()
        draft_row = QHBoxLayout()
        draft_row.addWidget(self.draft_path, 1)
        draft_row.addWidget(self.browse)
        form = QFormLayout(self)
        form.addRow("Speculative", self.speculative)
        form.addRow("Draft model", draft_row)
        form.addRow(self.message)
        self._folder = False  # the model is a model folder (the PyTorch engine), not a GGUF file
        self._tokens: int | None = None  # drafts per step, kept as stored: no control shows it
        self._loading = False
        self.set_model_path("")
        self.set_values(ChatSettings())
        self.speculative.currentIndexChanged.connect(self._on_mode)
        self.browse.clicked.connect(self.choose_draft)

    # ------------------------------------------------------------ values

    def set_model_path(self, path: str) -> None:
        """Pick drafts of `path`'s kind: a model folder for a model folder, else a .gguf file."""
        self._folder = bool(path) and is_model_folder(path)
        if self._folder:
            self.draft_path.setToolTip("The draft model's folder (config.json, tokenizer, *.safetensors): a "
                                       "smaller model with the same tokenizer as this one. Reloads the model.")
            self.browse.setToolTip("Choose the draft model's folder")
            auto = "Prompt lookup on the CPU, off on a GPU; a draft model when one is chosen."
        else:
            self.draft_path.setToolTip("The draft model's .gguf file: a smaller model with the same vocabulary "
                                       "as this one. Reloads the model.")
            self.browse.setToolTip("Choose the draft model's .gguf file")
            auto = SPECULATIVE[0][2]
        self.speculative.setItemData(0, auto, Qt.ItemDataRole.ToolTipRole)

    def set_values(self, settings: ChatSettings) -> None:
        """Show the speculative decoding of `settings` without reporting a change."""
        self._loading = True
        try:
            options = settings.load.speculation
            self.speculative.setCurrentIndex(max(self.speculative.findData(options.mode), 0))
            self.draft_path.setText(options.draft_path or "")
            self._tokens = options.tokens
            self._show_message("")
            self._update_draft_controls()
        finally:
            self._loading = False

    def values(self) -> SpeculativeOptions:
        """The speculative decoding shown (drafts per step as stored: the engine's default unless set)."""
        return SpeculativeOptions(
            mode=self.speculative.currentData(), draft_path=self.draft_path.text() or None, tokens=self._tokens
        )

    # ------------------------------------------------------------ the draft model

    @Slot()
    def choose_draft(self) -> None:
        """Ask for the draft model (a folder or a .gguf file, as the model is); a wrong kind is refused
        here, nothing changed."""
        if self._folder:
            path = QFileDialog.getExistingDirectory(self, "Choose the draft model's folder (same tokenizer)",
                                                    self.draft_path.text())
        else:
            path, _filter = QFileDialog.getOpenFileName(self, "Choose the draft model (same vocabulary)",
                                                        self.draft_path.text(), "GGUF models (*.gguf)")
        if not path:
            return
        name = Path(path).name or path
        if self._folder and not is_model_folder(path):
            self._show_message(f"{name} is not a model folder (it has no config.json): the draft model is unchanged.")
            return
        if not self._folder and not (path.lower().endswith(".gguf") and Path(path).is_file()):
            self._show_message(f"{name} is not a .gguf file: the draft model is unchanged.")
            return
        self.draft_path.setText(path)
        self._show_message("")
        self._changed()

    def _on_mode(self) -> None:
        self._update_draft_controls()
        self._changed()

    def _update_draft_controls(self) -> None:
        drafting = self.speculative.currentData() == "draft"
        self.draft_path.setEnabled(drafting)
        self.browse.setEnabled(drafting)
        if drafting and not self.draft_path.text():
            self._show_message(NO_DRAFT_HINT)
        elif self.message.text() == NO_DRAFT_HINT:
            self._show_message("")

    def _show_message(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def _changed(self) -> None:
        if not self._loading:
            self.changed.emit()

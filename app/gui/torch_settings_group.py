"""TorchSettingsGroup: the PyTorch engine's load settings of a chat (speculative decoding, KV memory).

Shown only while the model is a Hugging Face model folder (the PyTorch engine runs it); a GGUF
file ignores these settings. Each one reloads the model before the next reply, like the context
length does (app/chat/load_settings.py).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from app.services.store import ChatSettings
from models.folder_plan import is_model_folder
from models.load_options import TorchOptions

GIB = 1 << 30
# (value of TorchOptions.speculative, label, what it does)
SPECULATIVE = (
    ("auto", "Auto", "Prompt lookup on the CPU, off on a GPU."),
    ("off", "Off", "One token per step of the model."),
    ("lookup", "Prompt lookup",
     "Guesses the next tokens by finding the last few in the prompt: fast when the reply repeats it "
     "(rewrites, code edits). Needs no other model."),
    ("draft", "Draft model",
     "A smaller model with exactly this model's tokenizer guesses the next tokens; choose its folder below."),
)
CPU_KV_MIN_GIB, CPU_KV_MAX_GIB = 0.25, 64.0
NO_DRAFT_HINT = "Choose the draft model's folder: until then the model cannot load with a draft."


class TorchSettingsGroup(QGroupBox):
    """Speculative decoding, the draft model's folder, the GPU memory share and the CPU KV budget.

    Args:
        parent: the Qt parent.

    Signals:
        changed(): the user changed a setting (not sent by `set_values`).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("PyTorch engine", parent)
        self.setToolTip("Settings of the PyTorch engine, which runs model folders (safetensors, AWQ). "
                        "Each change reloads the model before the next reply.")
        self.speculative = QComboBox()
        for i, (value, label, tip) in enumerate(SPECULATIVE):
            self.speculative.addItem(label, value)
            self.speculative.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        self.speculative.setToolTip(
            "Speculative decoding: cheap guesses of the next tokens, checked by the model in one step. "
            "The reply is the same; it comes faster when the guesses are right. Auto: prompt lookup on "
            "the CPU, off on a GPU. Reloads the model."
        )
        self.draft_path = QLineEdit(readOnly=True, placeholderText="No draft model chosen")
        self.draft_path.setToolTip("The draft model's folder (config.json, tokenizer, *.safetensors): a smaller "
                                   "model with the same tokenizer as this one. Reloads the model.")
        self.browse = QPushButton("Browse…")
        self.browse.setToolTip("Choose the draft model's folder")
        self.message = QLabel(wordWrap=True)
        self.message.setStyleSheet("color: #b3261e;")
        self.message.hide()
        self.gpu_share = QSpinBox(minimum=10, maximum=100, singleStep=5, suffix=" %")
        self.gpu_share.setToolTip(
            "Share of the GPU memory left free after the weights that the KV cache may take: more for "
            "longer chats and more chats at once, less for other programs. Reloads the model."
        )
        self.cpu_kv = QDoubleSpinBox(minimum=0.0, maximum=CPU_KV_MAX_GIB, singleStep=0.25, decimals=2,
                                     suffix=" GiB", specialValueText="Auto")
        self.cpu_kv.setToolTip(
            "Memory for the KV cache when the model runs on the CPU (0.25 to 64 GiB). Auto: 1 GiB, or a "
            "quarter of the free RAM when that is less. Reloads the model."
        )
        draft_row = QHBoxLayout()
        draft_row.addWidget(self.draft_path, 1)
        draft_row.addWidget(self.browse)
        form = QFormLayout(self)
        form.addRow("Speculative", self.speculative)
        form.addRow("Draft model", draft_row)
        form.addRow(self.message)
        form.addRow("GPU memory", self.gpu_share)
        form.addRow("CPU KV cache", self.cpu_kv)
        self._loading = False
        self.set_values(ChatSettings())
        self.speculative.currentIndexChanged.connect(self._on_mode)
        self.browse.clicked.connect(self.choose_draft)
        self.gpu_share.valueChanged.connect(self._changed)
        self.cpu_kv.valueChanged.connect(self._changed)
        self.cpu_kv.editingFinished.connect(self._snap_cpu_kv)

    # ------------------------------------------------------------ values

    def set_values(self, settings: ChatSettings) -> None:
        """Show the PyTorch engine's part of `settings` without reporting a change."""
        self._loading = True
        try:
            options = settings.torch
            index = self.speculative.findData(options.speculative)
            self.speculative.setCurrentIndex(max(index, 0))
            self.draft_path.setText(options.draft_path or "")
            self.gpu_share.setValue(round(options.gpu_memory_fraction * 100))
            gib = options.cpu_kv_bytes / GIB if options.cpu_kv_bytes else 0.0
            self.cpu_kv.setValue(min(max(gib, CPU_KV_MIN_GIB), CPU_KV_MAX_GIB) if gib else 0.0)
            self._show_message("")
            self._update_draft_controls()
        finally:
            self._loading = False

    def values(self) -> TorchOptions:
        """The PyTorch engine's options, as shown (drafts per step: the engine's default, no control)."""
        gib = self.cpu_kv.value()
        return TorchOptions(
            speculative=self.speculative.currentData(),
            draft_path=self.draft_path.text() or None,
            gpu_memory_fraction=self.gpu_share.value() / 100,
            cpu_kv_bytes=round(max(gib, CPU_KV_MIN_GIB) * GIB) if gib > 0 else None,
        )

    # ------------------------------------------------------------ the draft model

    @Slot()
    def choose_draft(self) -> None:
        """Ask for the draft model's folder; one without config.json is refused here, nothing changed."""
        path = QFileDialog.getExistingDirectory(self, "Choose the draft model's folder (same tokenizer)",
                                                self.draft_path.text())
        if not path:
            return
        if not is_model_folder(path):
            self._show_message(f"{Path(path).name or path} is not a model folder (it has no config.json): "
                               "the draft model is unchanged.")
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

    # ------------------------------------------------------------ changes

    def _snap_cpu_kv(self) -> None:
        """A budget typed under the minimum becomes the minimum (0 stays Auto)."""
        if 0 < self.cpu_kv.value() < CPU_KV_MIN_GIB:
            self.cpu_kv.setValue(CPU_KV_MIN_GIB)

    def _changed(self) -> None:
        if not self._loading:
            self.changed.emit()

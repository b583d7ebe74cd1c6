"""SettingsPanel: the open conversation's system prompt and sampling settings."""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.context_box import AutoCapBox, ContextBox
from app.gui.side_panel.settings.preset_dialog import PresetDialog
from app.gui.side_panel.settings.reasoning_group import ReasoningGroup
from app.gui.side_panel.settings.speculation_group import SpeculationGroup
from app.gui.side_panel.settings.torch_settings_group import TorchSettingsGroup
from app.services.history.settings_fields import (
    DOCUMENT_BUDGET_RANGE,
    FLASH_ATTN,
    KV_TYPES,
    MAX_TOKENS_RANGE,
    TEMPERATURE_RANGE,
    TOP_P_RANGE,
)
from app.services.history.store import ChatSettings, Preset
from app.services.load_settings import LoadSettings
from engine.protocol import ModelInfo
from models.plan.folder_plan import is_model_folder

# The chat settings the panel shows and edits; the rest (the chat's tool servers, allowed tools, tool choice and
# step cap, its knowledge) are set elsewhere and must survive the panel's edits (ChatSession.update_settings).
PANEL_FIELDS = ("system_prompt", "temperature", "top_p", "max_tokens", "load", "reasoning", "think_budget",
                "document_budget")
ALL_THAT_FITS = "All that fits"


class SettingsPanel(QWidget):
    """Per-conversation settings; a changed context length reloads the model before the next reply.

    Args:
        parent: the Qt parent.

    Signals:
        settings_changed(object): the new ChatSettings (sent shortly after an edit, or by `commit`).
        preset_saved(object): the user saved these settings as a `Preset`.
        preset_deleted(str): the user deleted the preset of this name.
    """

    settings_changed = Signal(object)
    preset_saved = Signal(object)
    preset_deleted = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("System prompt (optional)")
        self.system_prompt.setMaximumHeight(110)
        self.temperature = _double(*TEMPERATURE_RANGE, 0.05)
        self.top_p = _double(*TOP_P_RANGE, 0.01)
        self.max_tokens = _int(*MAX_TOKENS_RANGE, 64)
        # Its minimum, one below the least budget, stands for "all that fits" (None).
        self.document_budget = _int(DOCUMENT_BUDGET_RANGE[0] - 1, DOCUMENT_BUDGET_RANGE[1], 256)
        self.document_budget.setSpecialValueText(ALL_THAT_FITS)
        self.document_budget.setSuffix(" tokens")
        self.document_budget.setToolTip(
            "The most tokens a message's documents may take (attached files, and the chat's knowledge). "
            f"{ALL_THAT_FITS}: what the context leaves after the conversation and the reply. A document that "
            "fits goes in whole; else the passages that answer the question, as many as fit.")
        self.n_ctx = ContextBox()
        self.n_ctx.setToolTip("Context length in tokens. Auto: the largest that fits this machine with this model "
                              "(up to the auto cap and the model's trained length). Changing it reloads the model.")
        self.auto_cap = AutoCapBox()
        self.auto_cap.setToolTip("The most tokens Auto chooses: a longer context costs memory and slows every "
                                 "reply a little. Raise it for long documents; reloads the model.")
        # What the engine loaded, which Auto decides only at load time.
        self.loaded_context = QLabel("", wordWrap=True)
        self.loaded_context.setToolTip("The context the loaded model has, in tokens")
        self.kv_type = _choice(KV_TYPES, "KV cache type: q8_0 halves its memory, q4_0 quarters it; reloads the model.")
        self.flash_attn = _choice(FLASH_ATTN, "Flash attention; a quantized KV cache needs it on. Reloads the model.")
        presets_row = self._build_presets_row()
        outer = QVBoxLayout(self)
        form = self._form = QFormLayout()
        # In a narrow side panel a row's label goes above its field rather than squeezing it.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        outer.addLayout(form)
        self.reasoning_group = ReasoningGroup()  # enabled while the loaded model's template reasons
        outer.addWidget(self.reasoning_group)
        self.speculation_group = SpeculationGroup()  # every model: both engines decode speculatively
        outer.addWidget(self.speculation_group)
        self.torch_group = TorchSettingsGroup()  # shown while the model is a folder (the PyTorch engine)
        self.torch_group.hide()
        outer.addWidget(self.torch_group)
        outer.addStretch(1)
        form.addRow("Preset", presets_row)
        form.addRow("System prompt", self.system_prompt)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("Documents", self.document_budget)
        form.addRow("Context", self.n_ctx)
        form.addRow("Auto cap", self.auto_cap)
        form.addRow("", self.loaded_context)
        form.setRowVisible(self.loaded_context, False)  # until a model is loaded
        form.addRow("KV cache", self.kv_type)
        form.addRow("Flash attention", self.flash_attn)
        self._connect_fields()
        self.set_presets([])

    def _build_presets_row(self) -> QHBoxLayout:
        """The preset drop-down with Save… and Delete beside it."""
        self._presets: list[Preset] = []
        self.preset = QComboBox()
        self.preset.setToolTip("Apply a preset's system prompt and sampling to this chat")
        # Narrow enough for its row to stay beside its label in the side panel (a long name is elided).
        self.preset.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.preset.setMinimumContentsLength(10)
        self.save_preset = QPushButton("Save…")
        self.save_preset.setToolTip("Save this chat's system prompt and sampling as a preset")
        self.delete_preset = QPushButton("Delete")
        row = QHBoxLayout()
        row.addWidget(self.preset, 1)
        row.addWidget(self.save_preset)
        row.addWidget(self.delete_preset)
        return row

    def _connect_fields(self) -> None:
        """Every field's change starts the 300 ms wait before `settings_changed`; the preset buttons act."""
        self._loading = False
        self._timer = QTimer(self, singleShot=True, interval=300)
        self._timer.timeout.connect(self._emit)
        self.system_prompt.textChanged.connect(self._changed)
        for box in (self.temperature, self.top_p, self.max_tokens, self.document_budget, self.n_ctx, self.auto_cap):
            box.valueChanged.connect(self._changed)
        self.n_ctx.valueChanged.connect(lambda _value: self.auto_cap.setEnabled(self.n_ctx.context() is None))
        for combo in (self.kv_type, self.flash_attn):
            combo.currentTextChanged.connect(self._changed)
        self.reasoning_group.changed.connect(self._changed)
        self.speculation_group.changed.connect(self._changed)
        self.torch_group.changed.connect(self._changed)
        self.preset.activated.connect(self._apply_preset)
        self.save_preset.clicked.connect(self.ask_save_preset)
        self.delete_preset.clicked.connect(self._delete_preset)
        self.preset.currentIndexChanged.connect(lambda i: self.delete_preset.setEnabled(i > 0))

    # ------------------------------------------------------------ presets

    def set_presets(self, presets: list[Preset]) -> None:
        """Show the presets there are (pinned ones marked so)."""
        self._presets = list(presets)
        self.preset.blockSignals(True)
        self.preset.clear()
        self.preset.addItem("Choose a preset…")
        for p in self._presets:
            self.preset.addItem(f"{p.name} (pinned)" if p.pinned else p.name, p.name)
        self.preset.setCurrentIndex(0)
        self.preset.blockSignals(False)
        self.delete_preset.setEnabled(False)

    def presets(self) -> list[Preset]:
        return list(self._presets)

    @Slot(int)
    def _apply_preset(self, index: int) -> None:
        if index <= 0:
            return
        chosen = self._presets[index - 1]
        self.set_settings(chosen.apply_to(self.settings()))
        self.preset.setCurrentIndex(index)
        self._emit()

    @Slot()
    def ask_save_preset(self) -> PresetDialog:
        """Open the save dialog (non-blocking); saving emits `preset_saved`."""
        dialog = PresetDialog(self.settings(), [p.name for p in self._presets], self)
        dialog.accepted.connect(lambda: self.preset_saved.emit(dialog.preset()))
        dialog.open()
        return dialog

    @Slot()
    def _delete_preset(self) -> None:
        name = self.preset.currentData()
        if name:
            self.preset_deleted.emit(name)

    def set_settings(self, settings: ChatSettings) -> None:
        """Show `settings` without reporting a change."""
        self._timer.stop()
        self._loading = True
        try:
            self.system_prompt.setPlainText(settings.system_prompt)
            self.temperature.setValue(settings.temperature)
            self.top_p.setValue(settings.top_p)
            self.max_tokens.setValue(settings.max_tokens)
            budget = settings.document_budget
            self.document_budget.setValue(self.document_budget.minimum() if budget is None else budget)
            self.n_ctx.set_context(settings.load.n_ctx)
            self.auto_cap.setValue(settings.load.auto_ctx_cap)
            self.kv_type.setCurrentText(settings.load.kv_type)
            self.flash_attn.setCurrentText(settings.load.flash_attn)
            self.reasoning_group.set_values(settings)
            self.speculation_group.set_values(settings)
            self.torch_group.set_values(settings)
        finally:
            self._loading = False

    def settings(self) -> ChatSettings:
        reasoning, think_budget = self.reasoning_group.values()
        return ChatSettings(
            system_prompt=self.system_prompt.toPlainText(),
            temperature=round(self.temperature.value(), 3),
            top_p=round(self.top_p.value(), 3),
            max_tokens=self.max_tokens.value(),
            document_budget=(None if self.document_budget.value() == self.document_budget.minimum()
                             else self.document_budget.value()),
            load=LoadSettings(
                n_ctx=self.n_ctx.context(),
                auto_ctx_cap=self.auto_cap.value(),
                kv_type=self.kv_type.currentText(),
                flash_attn=self.flash_attn.currentText(),
                speculation=self.speculation_group.values(),
                torch=self.torch_group.values(),
            ),
            reasoning=reasoning,
            think_budget=think_budget,
        )

    def set_model_path(self, path: str) -> None:
        """Show the PyTorch engine's settings only while the model is a model folder, and llama.cpp's
        (KV cache type, flash attention) only while it is a GGUF file: each engine ignores the other's.
        Speculative decoding is shown for both; its draft is of the model's kind (a folder or a .gguf file)."""
        folder = is_model_folder(path)
        self.speculation_group.set_model_path(path)
        self.torch_group.setVisible(folder)
        for widget in (self.kv_type, self.flash_attn):
            self._form.setRowVisible(widget, not folder)

    def show_model_info(self, info: ModelInfo) -> None:
        """What the loaded model can do: the reasoning controls only where its template reasons."""
        self.reasoning_group.set_reasoning_format(info.reasoning_format)

    def show_loaded_context(self, text: str) -> None:
        """Say what context the model was loaded with ("Context: Auto — 32,768 tokens"); "" hides the line."""
        self.loaded_context.setText(text)
        self._form.setRowVisible(self.loaded_context, bool(text))

    @Slot()
    def commit(self) -> None:
        """Report pending edits now (called before a message is sent)."""
        if self._timer.isActive():
            self._timer.stop()
            self._emit()

    def _emit(self) -> None:
        self.settings_changed.emit(self.settings())

    def _changed(self) -> None:
        if not self._loading:
            self._timer.start()


def _choice(options: tuple[str, ...], tooltip: str) -> QComboBox:
    box = QComboBox()
    box.addItems(options)
    box.setToolTip(tooltip)
    return box


def _double(low: float, high: float, step: float) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setDecimals(2)
    return box


def _int(low: int, high: int, step: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    return box

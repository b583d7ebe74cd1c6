"""ReasoningGroup: how much a reasoning model thinks before it answers, for one chat.

The choice and the budget go with each reply (ReplyShape), so a change needs no reload. Both are
enabled only while the loaded model's chat template has a reasoning format; the chat keeps its
choice meanwhile.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QSpinBox, QWidget

from app.services.history.store import ChatSettings
from engine.protocol import Reasoning

# (ReplyShape.reasoning, label, what it does)
REASONING = (
    ("auto", "Auto", "As the model's chat template does by default."),
    ("on", "On", "The model thinks before it answers."),
    ("off", "Off", "The model answers at once, where its template can switch thinking off."),
    ("low", "Low effort", "A short think (gpt-oss's reasoning effort; On for other models)."),
    ("medium", "Medium effort", "A medium think (gpt-oss's reasoning effort; On for other models)."),
    ("high", "High effort", "A long think (gpt-oss's reasoning effort; On for other models)."),
)
MAX_BUDGET = 131_072
NO_REASONING = "This model's chat template has no reasoning."
NO_MODEL = "Load a model to choose how much it thinks."
_COMBO_TIP = "How much the model thinks before it answers; applies from the next reply."
_BUDGET_TIP = ("The most tokens the model may spend thinking; then it answers. 0: no cap. "
               "Applies from the next reply.")


class ReasoningGroup(QGroupBox):
    """The reasoning choice and the thinking budget of a chat.

    Args:
        parent: the Qt parent.

    Signals:
        changed(): the user changed a setting (not sent by `set_values`).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Reasoning", parent)
        self.reasoning = QComboBox()
        for i, (value, label, tip) in enumerate(REASONING):
            self.reasoning.addItem(label, value)
            self.reasoning.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        self.budget = QSpinBox()
        self.budget.setRange(0, MAX_BUDGET)
        self.budget.setSingleStep(256)
        self.budget.setSuffix(" tokens")
        self.budget.setSpecialValueText("No cap")  # shown for 0
        form = QFormLayout(self)
        form.addRow("Reasoning", self.reasoning)
        form.addRow("Thinking budget", self.budget)
        self._loading = False
        self._format: str | None = None
        self.set_reasoning_format(None, loaded=False)
        self.reasoning.currentIndexChanged.connect(self._on_choice)
        self.budget.valueChanged.connect(self._changed)

    def set_reasoning_format(self, name: str | None, loaded: bool = True) -> None:
        """The loaded model's reasoning format (ModelInfo.reasoning_format): None disables the controls,
        saying why in their tooltips."""
        self._format = name
        why = NO_MODEL if not loaded else NO_REASONING if name is None else ""
        self.setToolTip(why or f"This model reasons ({name} format).")
        self.reasoning.setToolTip(why or _COMBO_TIP)
        self.budget.setToolTip(why or _BUDGET_TIP)
        self.reasoning.setEnabled(name is not None)
        self._update_budget()

    @property
    def available(self) -> bool:
        """Whether the loaded model reasons (the controls are enabled)."""
        return self._format is not None

    def set_values(self, settings: ChatSettings) -> None:
        """Show the reasoning of `settings` without reporting a change."""
        self._loading = True
        try:
            self.reasoning.setCurrentIndex(max(self.reasoning.findData(settings.reasoning), 0))
            self.budget.setValue(min(settings.think_budget or 0, MAX_BUDGET))
            self._update_budget()
        finally:
            self._loading = False

    def values(self) -> tuple[Reasoning, int | None]:
        """(reasoning, think_budget) as ChatSettings holds them (0 shown: None, no cap)."""
        return self.reasoning.currentData(), self.budget.value() or None

    def _on_choice(self) -> None:
        self._update_budget()
        self._changed()

    def _update_budget(self) -> None:
        """The budget means nothing while thinking is off."""
        self.budget.setEnabled(self.available and self.reasoning.currentData() != "off")

    def _changed(self) -> None:
        if not self._loading:
            self.changed.emit()

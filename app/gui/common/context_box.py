"""ContextBox: a context length in tokens, or Auto (the largest that fits); and AutoCapBox, Auto's ceiling.

Both step by powers of two (2,048 → 4,096 → 8,192 …), the numbers people think of a context
in; any number in range can still be typed. Shared by the chat settings and the Models window's
repo page, so the two read the same.
"""

from __future__ import annotations

from PySide6.QtWidgets import QSpinBox, QWidget

from app.services.chat_defaults import DEFAULT_AUTO_CTX_CAP
from app.services.history.settings_fields import CONTEXT_RANGE

AUTO = 0  # the box's value for Auto; ChatSettings and LoadSettings hold None
AUTO_TEXT = "Auto (largest that fits)"
MIN_CONTEXT, MAX_CONTEXT = CONTEXT_RANGE  # a chat template and a reply; today's longest trained contexts


class _PowerOfTwoBox(QSpinBox):
    """A spin box whose arrows double and halve; values show with thousands separators."""

    def __init__(self, low: int, high: int, parent: QWidget | None = None):
        super().__init__(parent)
        self.setRange(low, high)
        self.setGroupSeparatorShown(True)
        self.setSuffix(" tokens")
        # The value changes when typing ends (Enter, focus out), not at each digit: "8192" would
        # otherwise pass through 8, 81 and 819, each a reload request.
        self.setKeyboardTracking(False)

    def stepBy(self, steps: int) -> None:  # noqa: N802 (Qt override)
        value = self.value()
        for _ in range(abs(steps)):
            value = self._step(value, steps > 0)
        self.setValue(value)

    def _step(self, value: int, up: bool) -> int:
        power = 1 << max(value, 1).bit_length()  # the power of two above value
        if up:
            return min(self.maximum(), power if power // 2 != value else value * 2)
        below = power // 2 if power // 2 != value else value // 2
        return max(self.minimum(), below)


class ContextBox(_PowerOfTwoBox):
    """Context length: Auto (value 0, shown as "Auto (largest that fits)") or 256 … 1,048,576 tokens."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(AUTO, MAX_CONTEXT, parent)
        self.setSpecialValueText(AUTO_TEXT)
        # Room for the whole of "Auto (largest that fits)" beside the arrows in a row of controls.
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(AUTO_TEXT + "  ") + 32)
        self.setValue(AUTO)
        self.editingFinished.connect(self._snap)

    def context(self) -> int | None:
        """The chosen length, or None for Auto."""
        value = self.value()
        return None if value == AUTO else max(value, MIN_CONTEXT)

    def set_context(self, n_ctx: int | None) -> None:
        self.setValue(AUTO if n_ctx is None else n_ctx)

    def _step(self, value: int, up: bool) -> int:
        if value == AUTO:
            return 2048 if up else AUTO
        if not up and value <= MIN_CONTEXT:
            return AUTO
        return max(MIN_CONTEXT, super()._step(value, up))

    def _snap(self) -> None:
        """A typed length under the smallest usable one becomes that one (0 stays Auto)."""
        if AUTO < self.value() < MIN_CONTEXT:
            self.setValue(MIN_CONTEXT)


class AutoCapBox(_PowerOfTwoBox):
    """The most tokens Auto may choose (2,048 … 1,048,576; 32,768 unless raised)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(2048, MAX_CONTEXT, parent)
        self.setValue(DEFAULT_AUTO_CTX_CAP)

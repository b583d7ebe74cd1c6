"""PermissionBar: the question the window asks above the message box before a tool call runs.

    Allow read_file (server files) to run?
    Reads a file of the project.
    ┌ {"path": "notes.txt"}                         ┐   (the arguments in full, monospace; scrolls)
    [Allow once] [Always in this chat] [Always for this tool] [Deny]

Enter answers Allow once and Esc Deny while the focus is in the bar (which it takes when it appears: on the
arguments, so a Space typed for the message box presses nothing); Alt+A, Alt+I, Alt+T and Alt+D answer from
anywhere in the window (Alt+C, Alt+S, Alt+V and Alt+H open the window's menus). Keys that come in the first
moments after the question appeared, or that repeat because a key is held, are ignored: an Enter meant for the
message box must not allow a call. Once answered (or when the question goes away) the focus returns to the
message box.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QElapsedTimer, QEvent, Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase, QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.tool_permissions import PermissionAsk
from app.gui.common.theme import set_tone
from app.gui.common.tool_text import pretty_arguments

KEY_DELAY_MS = 400  # keys this soon after the question appeared are not taken as its answer
ARGUMENT_LINES = 10  # the arguments box grows to this many lines, then scrolls
_ENTER = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
# (decision, text, shortcut, tooltip: {tool} is the tool's name)
_ANSWERS = (
    ("once", "Allow once", "Alt+A", "Run this call only (Enter or Alt+A)"),
    ("chat", "Always in this chat", "Alt+I", "Run {tool} in this chat from now on without asking (Alt+I)"),
    ("tool", "Always for this tool", "Alt+T", "Run {tool} in every chat from now on without asking (Alt+T)"),
    ("deny", "Deny", "Alt+D", "Do not run this call; the model is told it was denied (Esc or Alt+D)"),
)


class PermissionBar(QFrame):
    """The question, hidden until `ask` gets one.

    Args:
        composer: where the focus goes back to once answered (the message box); None: nowhere.
        parent: the Qt parent.
        key_delay_ms: how long after appearing keys are ignored.

    Signals:
        answered(str, str): the call's id and the decision ("once", "chat", "tool" or "deny").
    """

    answered = Signal(str, str)

    def __init__(self, composer: QWidget | None = None, parent: QWidget | None = None,
                 key_delay_ms: int = KEY_DELAY_MS):
        super().__init__(parent)
        self.setObjectName("permissionBar")
        set_tone(self, "warn", frame=True)
        self.setAccessibleName("Tool permission")
        self._composer, self._key_delay_ms = composer, key_delay_ms
        self._shown = QElapsedTimer()
        self.current: PermissionAsk | None = None
        self.question = QLabel(wordWrap=True, textFormat=Qt.TextFormat.RichText)
        self.description = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self.arguments = QPlainTextEdit(readOnly=True)
        self.arguments.setAccessibleName("Arguments of the call")
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.buttons: dict[str, QPushButton] = {}
        self._shortcuts: list[QShortcut] = []
        row = QHBoxLayout()
        for decision, text, keys, _tip in _ANSWERS:
            button = self.buttons[decision] = QPushButton(text)
            button.clicked.connect(lambda _checked=False, d=decision: self._answer(d))
            row.addWidget(button)
            shortcut = QShortcut(QKeySequence(keys), self, context=Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(lambda d=decision: self._key_answer(d))
            self._shortcuts.append(shortcut)
        row.addStretch(1)
        bold = self.buttons["once"].font()
        bold.setBold(True)
        self.buttons["once"].setFont(bold)  # the default answer (Enter)
        layout = QVBoxLayout(self)
        layout.addWidget(self.question)
        layout.addWidget(self.description)
        layout.addWidget(self.arguments)
        layout.addLayout(row)
        self.hide()

    @Slot(object)
    def ask(self, ask: PermissionAsk | None) -> None:
        """Show a question (replacing any shown), or hide the bar when None (no question stands any more)."""
        if ask is None:
            self._close()
            return
        self.current = ask
        call = ask.call
        where = f" (server <b>{escape(call.server)}</b>)" if call.server else ""
        self.question.setText(f"Allow <code>{escape(call.name)}</code>{where} to run?")
        self.description.setText(ask.description.strip())
        self.description.setVisible(bool(ask.description.strip()))
        self.arguments.setPlainText(pretty_arguments(call.arguments) or "(no arguments)")
        self._fit_arguments()
        for decision, _text, _keys, tip in _ANSWERS:
            self.buttons[decision].setToolTip(tip.format(tool=call.name))
        self.show()
        self._shown.start()
        self.arguments.setFocus(Qt.FocusReason.OtherFocusReason)

    def _fit_arguments(self) -> None:
        lines = min(ARGUMENT_LINES, max(1, self.arguments.document().lineCount()))
        metrics = self.arguments.fontMetrics()
        margins = self.arguments.contentsMargins()
        frame = 2 * self.arguments.frameWidth() + margins.top() + margins.bottom()
        height = lines * metrics.lineSpacing() + 2 * round(self.arguments.document().documentMargin()) + frame
        self.arguments.setFixedHeight(height)

    # ------------------------------------------------------------ answers

    def _answer(self, decision: str) -> None:
        ask = self.current
        if ask is None:
            return
        self._close()
        self.answered.emit(ask.call.id, decision)

    def _keys_ready(self) -> bool:
        return self._shown.isValid() and self._shown.elapsed() >= self._key_delay_ms

    def _key_answer(self, decision: str) -> None:
        if self.isVisible() and self._keys_ready():
            self._answer(decision)

    def _close(self) -> None:
        focused = QApplication.focusWidget()
        had_focus = focused is not None and (focused is self or self.isAncestorOf(focused))
        self.current = None
        self.hide()
        if had_focus and self._composer is not None:
            self._composer.setFocus(Qt.FocusReason.OtherFocusReason)

    def event(self, event: QEvent) -> bool:
        """Enter and Esc in the bar are its own: not the window's Esc (Stop) nor a default button's."""
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            plain = event.modifiers() in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)
            if plain and (event.key() in _ENTER or event.key() == Qt.Key.Key_Escape):
                event.accept()
                return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        key = event.key()
        if key not in _ENTER and key != Qt.Key.Key_Escape:
            super().keyPressEvent(event)
            return
        event.accept()
        if event.isAutoRepeat() or not self._keys_ready():
            return
        focused = next((d for d, button in self.buttons.items() if button.hasFocus()), "once")
        self._answer("deny" if key == Qt.Key.Key_Escape else focused)  # Enter: the focused button, else Allow once

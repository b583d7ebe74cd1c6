"""Copy, Regenerate, Edit: the buttons shown at a message's header while the mouse is over the message.

The transcript is one QTextDocument, which holds no widgets; so, as the ‹ 2/3 › bars (version_bar.py), the
buttons are a small real widget laid over the chat view's viewport, one for the whole view, moved to the
header of the message under the mouse: just right of the sender's name, clear of the version bar at the
right edge. It follows the mouse (an event filter on the viewport), and the document as it grows or
scrolls (coalesced into one pass per event-loop turn, and only while it is shown, so a streaming reply
costs nothing when the mouse is elsewhere). The keyboard reaches the same actions in the message's
context menu (message_menu.py), so the buttons take no focus and a click leaves the selection alone.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Slot
from PySide6.QtGui import QMouseEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QTextBrowser, QToolButton, QWidget

from app.gui.transcript.state import TranscriptRequests, TranscriptState
from app.services.history.store import Message

_GAP = 12  # between the sender's name and the buttons


def _button(text: str, name: str, tip: str) -> QToolButton:
    button = QToolButton(text=text, autoRaise=True)
    button.setAccessibleName(name)
    button.setToolTip(tip)
    button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    return button


class ActionBar(QWidget):
    """The buttons, over the viewport; `message_id` is the message they act on."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.message_id: int | None = None
        self.copy = _button("Copy", "Copy message", "Copy this message's text (a reply's answer, without its reasoning)")
        self.regenerate = _button("Regenerate", "Regenerate reply",
                                  "Write this reply again (Ctrl+R); this one stays, as another version")
        self.edit = _button("Edit", "Edit message", "Edit this message; Enter sends it as a new version")
        # The theme's base colour behind the buttons: they stay readable when they sit over text (a long
        # message whose header is scrolled away keeps them at the top).
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Base)
        font = self.font()
        font.setPointSizeF(font.pointSizeF() * 0.9)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        for button in (self.copy, self.regenerate, self.edit):
            button.setFont(font)
            layout.addWidget(button)
        self.hide()

    def set_message(self, message: Message, last: bool, can_change: bool) -> None:
        """Show what can be done with `message` (`last`: the last shown; `can_change`: no reply is being
        written, so the session would take a regeneration or an edit)."""
        self.message_id = message.id
        self.regenerate.setVisible(last and message.role == "assistant")
        self.regenerate.setEnabled(can_change)
        self.edit.setVisible(message.role == "user")
        self.edit.setEnabled(can_change)


class MessageActions(QObject):
    """The hover bar of a chat view, and where the mouse is over it.

    Args:
        view: the chat view (the bar is a child of its viewport).
        state: what the view shows.
        requests: the view's signals (Regenerate, Edit).
        copy: copies a shown message (Copy).
    """

    def __init__(self, view: QTextBrowser, state: TranscriptState, requests: TranscriptRequests,
                 copy: Callable[[int], None]):
        super().__init__(view)
        self._view, self._state = view, state
        self.bar = ActionBar(view.viewport())
        self._mouse: QPoint | None = None  # in viewport coordinates; None when the mouse is not over it
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self.place)
        view.viewport().installEventFilter(self)
        view.verticalScrollBar().valueChanged.connect(self.schedule)
        view.document().documentLayout().documentSizeChanged.connect(self.schedule)
        self.bar.copy.clicked.connect(lambda: self._act(copy))
        self.bar.regenerate.clicked.connect(lambda: self._act(lambda _mid: requests.regenerate_requested.emit()))
        self.bar.edit.clicked.connect(lambda: self._act(requests.edit_requested.emit))

    def _act(self, action) -> None:  # noqa: ANN001 (a callable taking the message id)
        if self.bar.message_id is not None:
            action(self.bar.message_id)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        # Moving onto the bar (a child of the viewport) is no Leave of the viewport, so the bar stays.
        if event.type() == QEvent.Type.MouseMove and isinstance(event, QMouseEvent):
            self._mouse = event.position().toPoint()
            self.place()
        elif event.type() == QEvent.Type.Leave:
            self._mouse = None
            self.hide()
        return False

    def hide(self) -> None:
        self.bar.hide()
        self.bar.message_id = None

    @Slot()
    def schedule(self) -> None:
        if self._mouse is not None and not self._timer.isActive():
            self._timer.start()

    @Slot()
    def place(self) -> None:
        """Put the bar at the header of the message under the mouse (the document may have moved under it)."""
        view, state = self._view, self._state
        message = state.message_at(view.cursorForPosition(self._mouse).position()) if self._mouse else None
        header = state.headers.get(message.id) if message is not None else None
        if message is None or header is None:
            self.hide()
            return
        shown = state.shown_ids()
        self.bar.set_message(message, shown[-1] == message.id, state.can_change())
        self.bar.adjustSize()
        block = view.document().findBlock(header.position())
        rect = view.document().documentLayout().blockBoundingRect(block)
        line = block.layout().lineAt(0)
        name_end = line.x() + line.naturalTextWidth() if line.isValid() else 0.0
        line_height = line.height() if line.isValid() else rect.height()
        x = rect.left() + name_end + _GAP - view.horizontalScrollBar().value()
        y = rect.top() - view.verticalScrollBar().value() + (line_height - self.bar.height()) / 2
        # A long message whose header is scrolled away keeps its buttons at the top, in reach.
        self.bar.move(round(x), max(0, round(y)))
        self.bar.show()
        self.bar.raise_()

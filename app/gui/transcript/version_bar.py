"""‹ 2/3 ›: the versions of a message (a regenerated reply, an edited message of yours), beside its header.

The transcript is one QTextDocument, which holds no widgets; so each bar is a small real widget laid
over the chat view's viewport, at the right of its message's header line, and moved there again
whenever the document is laid out anew or scrolled (coalesced into one pass per event-loop turn).
Real buttons give the keyboard and screen readers what a link in the text would not ("Previous
version", disabled at the first one).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QHBoxLayout, QLabel, QTextEdit, QToolButton, QWidget

from app.services.history.store import Version

_MARGIN = 8  # from the viewport's right edge


class VersionBar(QWidget):
    """‹ index/count › for one message.

    Args:
        message_id: the message shown (one of `version.ids`).
        version: its place among its versions.
        parent: the chat view's viewport.

    Signals:
        requested(int): show this version (a message id).
    """

    requested = Signal(int)

    def __init__(self, message_id: int, version: Version, parent: QWidget):
        super().__init__(parent)
        self.message_id = message_id
        self.previous = QToolButton(text="‹", autoRaise=True)
        self.previous.setAccessibleName("Previous version")
        self.previous.setToolTip("Previous version")
        self.next = QToolButton(text="›", autoRaise=True)
        self.next.setAccessibleName("Next version")
        self.next.setToolTip("Next version")
        self.label = QLabel()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.previous)
        layout.addWidget(self.label)
        layout.addWidget(self.next)
        self.previous.clicked.connect(lambda: self._step(-1))
        self.next.clicked.connect(lambda: self._step(+1))
        self._enabled = True
        self.set_version(version)

    def set_version(self, version: Version) -> None:
        self.version = version
        self.label.setText(f"{version.index}/{version.count}")
        self.label.setAccessibleName(f"Version {version.index} of {version.count}")
        self._update_buttons()

    def set_enabled(self, enabled: bool) -> None:
        """Off while a reply is being written (the session would refuse the switch)."""
        self._enabled = enabled
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.previous.setEnabled(self._enabled and self.version.index > 1)
        self.next.setEnabled(self._enabled and self.version.index < self.version.count)

    def _step(self, delta: int) -> None:
        at = self.version.index - 1 + delta
        if 0 <= at < self.version.count:
            self.requested.emit(self.version.ids[at])


class VersionBars(QObject):
    """The bars of the messages shown in a text view that have more than one version.

    Args:
        view: the chat view (the bars are children of its viewport).
        header_of: the cursor at a shown message's header, or None when it is not shown.

    Signals:
        requested(int): a bar asked for this version (a message id).
    """

    requested = Signal(int)

    def __init__(self, view: QTextEdit, header_of: Callable[[int], QTextCursor | None]):
        super().__init__(view)
        self._view, self._header_of = view, header_of
        self.bars: dict[int, VersionBar] = {}
        self._enabled = True
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self.place)
        view.verticalScrollBar().valueChanged.connect(self.schedule)
        view.document().documentLayout().documentSizeChanged.connect(self.schedule)

    def set_versions(self, versions: dict[int, Version], shown: list[int]) -> None:
        """Bars for the `shown` messages that have other versions (the others lose theirs)."""
        wanted = {mid: versions[mid] for mid in shown if mid in versions and versions[mid].count > 1}
        for mid in [m for m in self.bars if m not in wanted]:
            self.bars.pop(mid).deleteLater()
        for mid, version in wanted.items():
            bar = self.bars.get(mid)
            if bar is None:
                bar = self.bars[mid] = VersionBar(mid, version, self._view.viewport())
                bar.requested.connect(self.requested)
                bar.set_enabled(self._enabled)
                bar.show()
            else:
                bar.set_version(version)
        self.place()

    def clear(self) -> None:
        self.set_versions({}, [])

    def set_enabled(self, enabled: bool) -> None:
        self._enabled = enabled
        for bar in self.bars.values():
            bar.set_enabled(enabled)

    @Slot()
    def schedule(self) -> None:
        if self.bars and not self._timer.isActive():
            self._timer.start()

    @Slot()
    def place(self) -> None:
        """Put each bar at the right end of its header line, where the document is scrolled to now."""
        document = self._view.document()
        layout = document.documentLayout()
        top = self._view.verticalScrollBar().value()
        width = self._view.viewport().width()
        for mid, bar in self.bars.items():
            cursor = self._header_of(mid)
            if cursor is None:
                bar.hide()
                continue
            block = document.findBlock(cursor.position())
            rect = layout.blockBoundingRect(block)
            line = block.layout().lineAt(0)
            line_height = line.height() if line.isValid() else rect.height()
            bar.adjustSize()
            y = rect.top() - top + (line_height - bar.height()) / 2
            bar.move(max(0, width - bar.width() - _MARGIN), round(y))
            bar.show()

"""ChatTree: the tree of the chat list, folders with their chats, and dragging a chat onto a folder.

Qt's own drag and drop in a QTreeWidget moves the items themselves; here the store decides where a
chat is (the list is drawn again from it), so a drop only says which chats went to which folder
(`chats_dropped`) and the items stay where they are until then. The drag carries the chat ids in a
MIME type of its own, so nothing else dropped here is taken for a chat.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QMimeData, QPoint, QPointF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QDrag,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QIcon,
    QMouseEvent,
    QPainter,
    QPixmap,
)
from PySide6.QtWidgets import QAbstractItemView, QTreeWidget, QTreeWidgetItem, QWidget

CHAT_IDS_MIME = "application/x-tailor-chat-ids"
ID_ROLE = Qt.ItemDataRole.UserRole  # a chat's id, or a folder's
KIND_ROLE = Qt.ItemDataRole.UserRole + 1  # CHAT or FOLDER
NAME_ROLE = Qt.ItemDataRole.UserRole + 2  # the title or name as stored: an edit that changes nothing is no rename
PINNED_ROLE = Qt.ItemDataRole.UserRole + 3
CHAT, FOLDER = "chat", "folder"


def kind_of(item: QTreeWidgetItem | None) -> str | None:
    return item.data(0, KIND_ROLE) if item is not None else None


def chat_ids_of(data: QMimeData) -> list[int]:
    """The chats a drag carries (none when it is not one of ours)."""
    if not data.hasFormat(CHAT_IDS_MIME):
        return []
    text = bytes(data.data(CHAT_IDS_MIME).data()).decode("ascii", "replace")
    return [int(part) for part in text.split(",") if part.isdigit()]


def chat_ids_mime(ids: list[int]) -> QMimeData:
    data = QMimeData()
    data.setData(CHAT_IDS_MIME, QByteArray(",".join(str(i) for i in ids).encode("ascii")))
    return data


def pin_icon(color: QColor, size: int = 16) -> QIcon:
    """A push pin drawn in the text colour (no icon theme offers one everywhere; an emoji needs a font)."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    pen = painter.pen()
    pen.setColor(color)
    pen.setWidthF(size / 10)
    painter.setPen(pen)
    painter.drawLine(QPointF(size * 0.2, size * 0.8), QPointF(size * 0.5, size * 0.5))  # the needle
    painter.setBrush(color)
    painter.drawEllipse(QPointF(size * 0.62, size * 0.38), size * 0.26, size * 0.26)  # the head
    painter.end()
    return QIcon(pixmap)


class ChatTree(QTreeWidget):
    """Folders (top level, with their chats under them) and the chats in none.

    Args:
        parent: the Qt parent.

    Signals:
        chats_dropped(list, object): these chat ids were dropped into this folder (an id; None: out of any).
    """

    chats_dropped = Signal(list, object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setHeaderHidden(True)
        self.setColumnCount(1)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DragDrop)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.setDropIndicatorShown(True)
        self.current_before_press: int | None = None  # the chat that was current when the mouse went down

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        current = self.currentItem()
        self.current_before_press = current.data(0, ID_ROLE) if kind_of(current) == CHAT else None
        super().mousePressEvent(event)

    def folder_at(self, pos: QPoint) -> int | None:
        """The folder a drop at `pos` (viewport coordinates) goes into: the folder there, or the folder of the
        chat there; None (out of any folder) on a chat in none or below the items."""
        item = self.itemAt(pos)
        if kind_of(item) == CHAT:
            item = item.parent()
        return item.data(0, ID_ROLE) if kind_of(item) == FOLDER else None

    # ------------------------------------------------------------ Qt's drag and drop

    def mimeTypes(self) -> list[str]:  # noqa: N802 (Qt override)
        return [CHAT_IDS_MIME]

    def mimeData(self, items: list[QTreeWidgetItem]) -> QMimeData:  # noqa: N802 (Qt override)
        return chat_ids_mime([item.data(0, ID_ROLE) for item in items if kind_of(item) == CHAT])

    def supportedDropActions(self) -> Qt.DropAction:  # noqa: N802 (Qt override)
        return Qt.DropAction.MoveAction

    def startDrag(self, supported: Qt.DropAction) -> None:  # noqa: N802 (Qt override)
        # Not Qt's: after a move it would remove the dragged rows, which the drop has drawn again by then.
        chats = [item for item in self.selectedItems() if kind_of(item) == CHAT]
        if chats:
            drag = QDrag(self)
            drag.setMimeData(self.mimeData(chats))
            drag.exec(Qt.DropAction.MoveAction)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        super().dragEnterEvent(event)
        self._accept(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:  # noqa: N802 (Qt override)
        super().dragMoveEvent(event)  # the drop indicator and scrolling at the edges
        self._accept(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        ids = chat_ids_of(event.mimeData())
        self.stopAutoScroll()
        self.setState(QAbstractItemView.State.NoState)
        self.viewport().update()
        if not ids:
            event.ignore()
            return
        event.setDropAction(Qt.DropAction.MoveAction)
        event.accept()
        self.chats_dropped.emit(ids, self.folder_at(event.position().toPoint()))

    def _accept(self, event: QDragMoveEvent) -> None:
        if chat_ids_of(event.mimeData()):
            event.setDropAction(Qt.DropAction.MoveAction)
            event.accept()
        else:
            event.ignore()

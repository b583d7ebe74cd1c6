"""ConversationList: the conversations, a search box and the New button."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.dialogs import confirm
from app.services.store import Conversation

ID_ROLE = Qt.ItemDataRole.UserRole


def confirm_delete(parent: QWidget, title: str) -> bool:
    """Ask before deleting a conversation (tests replace this function)."""
    return confirm(parent, "Delete conversation", f"Delete “{title}” and all its messages? This cannot be undone.")


class ConversationList(QWidget):
    """List of conversations with search, New, Rename (F2, inline) and Delete.

    Args:
        parent: the Qt parent.

    Signals:
        selected(int): the user picked a conversation.
        new_requested(): the user asked for a new conversation.
        rename_requested(int, str): a conversation's new title.
        delete_requested(int): the user confirmed deleting a conversation.
        search_changed(str): the search text changed (debounced).
    """

    selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.search = QLineEdit(placeholderText="Search chats")
        self.search.setClearButtonEnabled(True)
        self.new_button = QPushButton("New chat")
        self.list = QListWidget()
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.search)
        layout.addWidget(self.list)
        layout.addWidget(self.new_button)
        self._filling = False
        self._search_timer = QTimer(self, singleShot=True, interval=150)
        self._search_timer.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(self._search_timer.start)
        self.new_button.clicked.connect(self.new_requested)
        self.list.currentItemChanged.connect(self._on_current_changed)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.customContextMenuRequested.connect(self._show_menu)
        self.rename_action = QAction("Rename", self, shortcut=QKeySequence(Qt.Key.Key_F2))
        self.rename_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.rename_action.triggered.connect(self.rename_current)
        self.delete_action = QAction("Delete…", self, shortcut=QKeySequence(QKeySequence.StandardKey.Delete))
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.delete_action.triggered.connect(self.delete_current)
        self.list.addActions([self.rename_action, self.delete_action])

    def set_conversations(self, conversations: list[Conversation], current_id: int | None) -> None:
        """Fill the list, keeping `current_id` selected when it is shown."""
        self._filling = True
        try:
            self.list.clear()
            for conversation in conversations:
                item = QListWidgetItem(conversation.title)
                item.setData(ID_ROLE, conversation.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if conversation.id == current_id:
                    self.list.setCurrentItem(item)
        finally:
            self._filling = False

    def set_editable(self, editable: bool) -> None:
        """Allow New, Rename and Delete, or only browsing (while the history cannot be saved to)."""
        self.new_button.setEnabled(editable)
        self.rename_action.setEnabled(editable)
        self.delete_action.setEnabled(editable)
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed if editable else QAbstractItemView.EditTrigger.NoEditTriggers
        )

    def ids(self) -> list[int]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())]

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(ID_ROLE) if item else None

    @Slot()
    def rename_current(self) -> None:
        """Start editing the current title in place (Enter commits)."""
        item = self.list.currentItem()
        if item is not None:
            self.list.setFocus()
            self.list.editItem(item)

    @Slot()
    def delete_current(self) -> None:
        item = self.list.currentItem()
        if item is not None and confirm_delete(self, item.text()):
            self.delete_requested.emit(item.data(ID_ROLE))

    def _on_current_changed(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is not None and not self._filling:
            self.selected.emit(current.data(ID_ROLE))

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if not self._filling:
            self.rename_requested.emit(item.data(ID_ROLE), item.text())

    def _show_menu(self, pos: QPoint) -> None:
        if self.list.itemAt(pos) is None:
            return
        menu = QMenu(self)
        menu.addActions([self.rename_action, self.delete_action])
        menu.popup(self.list.viewport().mapToGlobal(pos))

"""ConversationList: the chats in their folders, a search box and the New button.

Pinned chats in no folder come first, then the folders (each with its chats, pinned ones first), then
the other chats. Right-click for Pin, Move to folder, Rename and Delete, and for New folder; drag a chat
onto a folder to move it there. The widget only asks (signals); the window saves and draws it again.
"""

from __future__ import annotations

from collections.abc import Iterator

from PySide6.QtCore import QPoint, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QInputDialog,
    QLineEdit,
    QMenu,
    QPushButton,
    QStyle,
    QToolButton,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.chat_list.tree import (
    CHAT,
    FOLDER,
    ID_ROLE,
    KIND_ROLE,
    NAME_ROLE,
    PINNED_ROLE,
    ChatTree,
    kind_of,
    pin_icon,
)
from app.gui.common.dialogs import confirm
from app.services.history.store import Conversation, Folder


def confirm_delete(parent: QWidget, title: str) -> bool:
    """Ask before deleting a conversation (tests replace this function)."""
    return confirm(parent, "Delete conversation", f"Delete “{title}” and all its messages? This cannot be undone.")


def confirm_delete_folder(parent: QWidget, name: str) -> bool:
    """Ask before deleting a folder (tests replace this function)."""
    return confirm(parent, "Delete folder", f"Delete the folder “{name}”? Its chats stay, outside any folder.")


def ask_folder_name(parent: QWidget) -> str | None:
    """The name of a new folder, or None when the user cancelled (tests replace this function)."""
    name, ok = QInputDialog.getText(parent, "New folder", "Name of the folder:")
    return name if ok and name.strip() else None


class ConversationList(QWidget):
    """The chats and folders, with search, New, Rename (F2, inline), Delete, pins and folders.

    Args:
        parent: the Qt parent.

    Signals:
        selected(int): the user picked a conversation.
        new_requested(): the user asked for a new conversation.
        rename_requested(int, str): a conversation's new title.
        delete_requested(int): the user confirmed deleting a conversation.
        search_changed(str): the search text changed (debounced).
        pin_requested(int, bool): pin a conversation (True) or unpin it.
        move_requested(int, object): put a conversation into a folder (its id; None: out of any).
        folder_create_requested(str, object): a new folder of this name, and the chat to move into it (or None).
        folder_rename_requested(int, str): a folder's new name.
        folder_delete_requested(int): the user confirmed deleting a folder (its chats stay).
    """

    selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    search_changed = Signal(str)
    pin_requested = Signal(int, bool)
    move_requested = Signal(int, object)
    folder_create_requested = Signal(str, object)
    folder_rename_requested = Signal(int, str)
    folder_delete_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.search = QLineEdit(placeholderText="Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName("Search chats")
        for button in self.search.findChildren(QToolButton):  # Qt's clear button has no name of its own
            button.setAccessibleName("Clear the search")
            button.setToolTip("Clear the search")
        self.new_button = QPushButton("New chat")
        self.list = ChatTree()
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        # A long title is elided at the list's edge (the whole of it in the item's tooltip): the list
        # never scrolls sideways, its one column is always exactly as wide as the list.
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.header().setStretchLastSection(True)
        self.list.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.search)
        layout.addWidget(self.list)
        layout.addWidget(self.new_button)
        self._filling = False
        self._editable = True
        self._folders: list[Folder] = []
        self._collapsed: set[int] = set()  # folders the user closed, kept closed when the list is drawn again
        self._search_timer = QTimer(self, singleShot=True, interval=150)
        self._search_timer.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(self._search_timer.start)
        self.new_button.clicked.connect(self.new_requested)
        self.list.currentItemChanged.connect(self._on_current_changed)
        self.list.itemClicked.connect(self._on_clicked)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.itemCollapsed.connect(lambda item: self._opened(item, False))
        self.list.itemExpanded.connect(lambda item: self._opened(item, True))
        self.list.customContextMenuRequested.connect(self._show_menu)
        self.list.chats_dropped.connect(self._on_dropped)
        self.rename_action = QAction("Rename", self, shortcut=QKeySequence(Qt.Key.Key_F2))
        self.rename_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.rename_action.triggered.connect(self.rename_current)
        self.delete_action = QAction("Delete…", self, shortcut=QKeySequence(QKeySequence.StandardKey.Delete))
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.delete_action.triggered.connect(self.delete_current)
        self.list.addActions([self.rename_action, self.delete_action])

    # ------------------------------------------------------------ filling

    def set_conversations(self, conversations: list[Conversation], current_id: int | None,
                          folders: list[Folder] | None = None, searching: bool = False) -> None:
        """Fill the list, keeping `current_id` selected when it is shown. While `searching`, only the folders
        that hold a chat found are shown (all of them otherwise, empty ones too: something to drop onto)."""
        self._folders = list(folders or [])
        known = {folder.id for folder in self._folders}
        by_folder: dict[int | None, list[Conversation]] = {}
        for conversation in conversations:
            folder_id = conversation.folder_id if conversation.folder_id in known else None
            by_folder.setdefault(folder_id, []).append(conversation)
        loose = by_folder.get(None, [])
        self._pin = pin_icon(self.palette().color(QPalette.ColorRole.Text))  # drawn once for all pinned chats
        self._filling = True
        # Items are made detached and added a level at a time: each change to an item already in the tree
        # tells its model (5,000 chats took 58 ms one by one, the window frozen that long at every send).
        self.list.setUpdatesEnabled(False)
        try:
            self.list.clear()
            made: dict[int, QTreeWidgetItem] = {}
            self._chat_flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable  # once: Python's enum | is slow
            if self._editable:
                self._chat_flags |= Qt.ItemFlag.ItemIsEditable | Qt.ItemFlag.ItemIsDragEnabled
            self.list.addTopLevelItems([self._chat_item(c, made) for c in loose if c.pinned])
            for folder in self._folders:
                chats = by_folder.get(folder.id, [])
                if searching and not chats:
                    continue
                item = self._add_folder(folder, len(chats))
                item.addChildren([self._chat_item(c, made) for c in chats])
                item.setExpanded(searching or folder.id not in self._collapsed)
            self.list.addTopLevelItems([self._chat_item(c, made) for c in loose if not c.pinned])
            if current_id in made:
                self.list.setCurrentItem(made[current_id])
        finally:
            self.list.setUpdatesEnabled(True)
            self._filling = False

    def _add_folder(self, folder: Folder, count: int) -> QTreeWidgetItem:
        item = QTreeWidgetItem(self.list, [folder.name])
        item.setData(0, ID_ROLE, folder.id)
        item.setData(0, KIND_ROLE, FOLDER)
        item.setData(0, NAME_ROLE, folder.name)
        item.setIcon(0, self.style().standardIcon(QStyle.StandardPixmap.SP_DirIcon))
        item.setToolTip(0, f"{count} chat{'s' if count != 1 else ''}")
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsDropEnabled
        item.setFlags(flags | (Qt.ItemFlag.ItemIsEditable if self._editable else Qt.ItemFlag.NoItemFlags))
        return item

    def _chat_item(self, conversation: Conversation, made: dict[int, QTreeWidgetItem]) -> QTreeWidgetItem:
        """A chat's item, not in the tree yet (noted in `made` by chat id)."""
        item = QTreeWidgetItem([conversation.title])
        made[conversation.id] = item
        item.setData(0, ID_ROLE, conversation.id)
        item.setData(0, KIND_ROLE, CHAT)
        item.setData(0, NAME_ROLE, conversation.title)
        item.setData(0, PINNED_ROLE, conversation.pinned)
        item.setToolTip(0, conversation.title)  # the whole title, where the list elides it
        if conversation.pinned:
            item.setIcon(0, self._pin)
            item.setToolTip(0, f"{conversation.title}\nPinned")
            item.setData(0, Qt.ItemDataRole.AccessibleDescriptionRole, "Pinned")
        item.setFlags(self._chat_flags)
        return item

    def set_editable(self, editable: bool) -> None:
        """Allow New, Rename, Delete, pins and folders, or only browsing (while the history cannot be saved to)."""
        self._editable = editable
        self.new_button.setEnabled(editable)
        self.rename_action.setEnabled(editable)
        self.delete_action.setEnabled(editable)
        self.list.setDragEnabled(editable)
        self.list.setAcceptDrops(editable)
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed if editable else QAbstractItemView.EditTrigger.NoEditTriggers
        )
        for item in self._items():
            flags = item.flags() & ~(Qt.ItemFlag.ItemIsEditable | Qt.ItemFlag.ItemIsDragEnabled)
            if editable:
                flags |= Qt.ItemFlag.ItemIsEditable | (Qt.ItemFlag.ItemIsDragEnabled if kind_of(item) == CHAT
                                                       else Qt.ItemFlag.NoItemFlags)
            item.setFlags(flags)

    # ------------------------------------------------------------ what is shown

    def _items(self) -> Iterator[QTreeWidgetItem]:
        """Every item, in the order shown (a folder, then its chats)."""
        for i in range(self.list.topLevelItemCount()):
            top = self.list.topLevelItem(i)
            yield top
            for j in range(top.childCount()):
                yield top.child(j)

    def chat_items(self) -> list[QTreeWidgetItem]:
        return [item for item in self._items() if kind_of(item) == CHAT]

    def ids(self) -> list[int]:
        """The chats shown, in order (those in folders too, closed or open)."""
        return [item.data(0, ID_ROLE) for item in self.chat_items()]

    def item_of(self, conversation_id: int) -> QTreeWidgetItem | None:
        return next((i for i in self.chat_items() if i.data(0, ID_ROLE) == conversation_id), None)

    def folder_item(self, folder_id: int) -> QTreeWidgetItem | None:
        return next((i for i in self._items() if kind_of(i) == FOLDER and i.data(0, ID_ROLE) == folder_id), None)

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(0, ID_ROLE) if kind_of(item) == CHAT else None

    # ------------------------------------------------------------ actions

    @Slot()
    def rename_current(self) -> None:
        """Start editing the current title or folder name in place (Enter commits)."""
        self.rename(self.list.currentItem())

    @Slot()
    def delete_current(self) -> None:
        self.delete(self.list.currentItem())

    def rename(self, item: QTreeWidgetItem | None) -> None:
        if item is not None and self._editable:
            self.list.setFocus()
            self.list.editItem(item, 0)

    def delete(self, item: QTreeWidgetItem | None) -> None:
        """Delete a chat or a folder, once the user said yes."""
        if not self._editable:
            return
        if kind_of(item) == CHAT and confirm_delete(self, item.text(0)):
            self.delete_requested.emit(item.data(0, ID_ROLE))
        elif kind_of(item) == FOLDER and confirm_delete_folder(self, item.text(0)):
            self.folder_delete_requested.emit(item.data(0, ID_ROLE))

    def new_folder(self, move_chat: int | None = None) -> None:
        """Ask for a name and create a folder (moving `move_chat` into it)."""
        name = ask_folder_name(self)
        if name is not None:
            self.folder_create_requested.emit(name, move_chat)

    def _on_current_changed(self, current: QTreeWidgetItem | None, _previous: object) -> None:
        if kind_of(current) == CHAT and not self._filling:
            self.selected.emit(current.data(0, ID_ROLE))

    def _on_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        """A click on the chat open already, while searching: opened again, at what the search found (a click
        on another chat opened it as it became current)."""
        conversation_id = item.data(0, ID_ROLE)
        if kind_of(item) == CHAT and self.search.text().strip() and conversation_id == self.list.current_before_press:
            self.selected.emit(conversation_id)

    def _on_item_changed(self, item: QTreeWidgetItem, _column: int) -> None:
        if self._filling or item.text(0) == item.data(0, NAME_ROLE):
            return  # drawn, or its icon or flags changed: not renamed
        if kind_of(item) == CHAT:
            self.rename_requested.emit(item.data(0, ID_ROLE), item.text(0))
        elif kind_of(item) == FOLDER:
            self.folder_rename_requested.emit(item.data(0, ID_ROLE), item.text(0))

    def _opened(self, item: QTreeWidgetItem, expanded: bool) -> None:
        if self._filling or self.search.text().strip():
            return  # opened by the list itself (drawn again, or showing what a search found)
        (self._collapsed.discard if expanded else self._collapsed.add)(item.data(0, ID_ROLE))

    def _on_dropped(self, ids: list[int], folder_id: int | None) -> None:
        for conversation_id in ids:
            self.move_requested.emit(conversation_id, folder_id)

    # ------------------------------------------------------------ the context menu

    def item_menu(self, item: QTreeWidgetItem | None) -> QMenu:
        """The context menu of a chat, of a folder, or of the empty space below them (None); its actions are
        about that item, which need not be the current one (a right-click does not open a chat)."""
        menu = QMenu(self)
        if kind_of(item) == CHAT:
            conversation_id, pinned = item.data(0, ID_ROLE), bool(item.data(0, PINNED_ROLE))
            menu.addAction("Unpin" if pinned else "Pin to top",
                           lambda: self.pin_requested.emit(conversation_id, not pinned))
            menu.addMenu(self._move_menu(menu, conversation_id, item.parent()))
            menu.addSeparator()
        else:
            menu.addAction("New folder…", self.new_folder)
        if item is not None:
            menu.addAction("Rename", lambda: self.rename(item))
            menu.addAction("Delete…", lambda: self.delete(item))
        for action in menu.actions():
            action.setEnabled(self._editable)  # browsing a history that cannot be saved to
        return menu

    def _move_menu(self, parent: QMenu, conversation_id: int, folder: QTreeWidgetItem | None) -> QMenu:
        """Move to folder ▸ each folder (but its own), No folder (when it is in one), New folder…"""
        menu = QMenu("Move to folder", parent)
        here = folder.data(0, ID_ROLE) if folder is not None else None
        for each in self._folders:
            if each.id != here:
                menu.addAction(each.name, lambda f=each.id: self.move_requested.emit(conversation_id, f))
        menu.addSeparator()
        if here is not None:
            menu.addAction("No folder", lambda: self.move_requested.emit(conversation_id, None))
        menu.addAction("New folder…", lambda: self.new_folder(conversation_id))
        return menu

    def _show_menu(self, pos: QPoint) -> None:
        menu = self.item_menu(self.list.itemAt(pos))
        menu.aboutToHide.connect(menu.deleteLater)
        menu.popup(self.list.viewport().mapToGlobal(pos))

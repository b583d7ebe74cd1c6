"""Folders and pins in the window's chat list, on a real SQLite file (the engine is not started): the
context menu's Pin / Move to folder / New folder / Rename / Delete, dragging a chat onto a folder, pinned
chats first, and a search that shows only the folders holding a chat found."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QLineEdit, QMenu

from app.gui.chat_list import conversation_list
from app.gui.chat_list.tree import FOLDER, KIND_ROLE, PINNED_ROLE

WAIT_MS = 5000


def menu_action(menu: QMenu, *path: str):
    """The action at `path` in a menu ("Move to folder", "Work"), looking into submenus."""
    for action in menu.actions():
        if action.text() == path[0]:
            return action if len(path) == 1 else menu_action(action.menu(), *path[1:])
    raise AssertionError(f"no {path[0]!r} in {[a.text() for a in menu.actions()]}")


class Sidebar:
    """The window's chat list over its store, with a few chats made in order (the last is the newest)."""

    def __init__(self, window, *titles: str):
        self.window, self.store, self.list = window, window.session.store, window.conversations
        self.ids = {}
        for title in titles:
            self.ids[title] = self.store.create_conversation(title).id
        window.refresh_list()
        self._menus: list[QMenu] = []

    def menu(self, title: str | None = None, folder: str | None = None) -> QMenu:
        """The context menu of a chat, of a folder, or of the empty space (neither)."""
        item = None
        if title is not None:
            item = self.list.item_of(self.ids[title])
        elif folder is not None:
            item = self.list.folder_item(self.folder_id(folder))
        menu = self.list.item_menu(item)
        self._menus.append(menu)
        return menu

    def folder_id(self, name: str) -> int:
        return next(f.id for f in self.store.list_folders() if f.name == name)

    def top_level(self) -> list[str]:
        tree = self.list.list
        return [tree.topLevelItem(i).text(0) for i in range(tree.topLevelItemCount())]

    def in_folder(self, name: str) -> list[str]:
        item = self.list.folder_item(self.folder_id(name))
        return [item.child(i).text(0) for i in range(item.childCount())]

    def folder_of(self, title: str) -> int | None:
        return self.store.get_conversation(self.ids[title]).folder_id


def test_folders_from_the_context_menu_and_pins_first(qtbot, make_window, monkeypatch):
    window = make_window(start=False)
    side = Sidebar(window, "Alpha", "Beta", "Gamma")
    # Newest first, below them the chat the window opened with (made before them).
    assert side.top_level() == ["Gamma", "Beta", "Alpha", "New chat"]
    names = iter(["Work", "Home"])
    monkeypatch.setattr(conversation_list, "ask_folder_name", lambda parent: next(names))

    menu_action(side.menu(), "New folder…").trigger()  # on the empty space
    work = side.folder_id("Work")
    assert side.list.folder_item(work).data(0, KIND_ROLE) == FOLDER and side.in_folder("Work") == []

    menu_action(side.menu("Beta"), "Move to folder", "Work").trigger()
    assert side.folder_of("Beta") == work and side.in_folder("Work") == ["Beta"]
    assert "Beta" not in side.top_level()

    menu_action(side.menu("Alpha"), "Move to folder", "New folder…").trigger()  # made and moved into
    home = side.folder_id("Home")
    assert side.folder_of("Alpha") == home and side.in_folder("Home") == ["Alpha"]
    assert [f.name for f in window.session.folders.list()] == ["Home", "Work"]

    # Pinned: first (in no folder: above the folders too), marked, and the menu offers Unpin.
    menu_action(side.menu("Gamma"), "Pin to top").trigger()
    menu_action(side.menu("Alpha"), "Pin to top").trigger()
    gamma = side.list.item_of(side.ids["Gamma"])
    assert side.top_level()[:3] == ["Gamma", "Home", "Work"] and side.top_level()[-1] == "New chat"
    assert gamma.data(0, PINNED_ROLE) and not gamma.icon(0).isNull() and gamma.toolTip(0).splitlines() == [gamma.text(0), "Pinned"]
    assert side.list.ids()[:2] == [side.ids["Gamma"], side.ids["Alpha"]]
    assert menu_action(side.menu("Gamma"), "Unpin")
    side.store.create_conversation("Delta")  # newer, but not pinned
    window.refresh_list()
    assert side.top_level()[:3] == ["Gamma", "Home", "Work"]
    menu_action(side.menu("Gamma"), "Unpin").trigger()
    assert side.top_level()[0] == "Home" and not side.store.get_conversation(side.ids["Gamma"]).pinned

    # Out of a folder again: "No folder" (offered only to a chat in one).
    assert all(a.text() != "No folder" for a in menu_action(side.menu("Gamma"), "Move to folder").menu().actions())
    menu_action(side.menu("Beta"), "Move to folder", "No folder").trigger()
    assert side.folder_of("Beta") is None and "Beta" in side.top_level() and side.in_folder("Work") == []


def _drag(tree, data: QMimeData, pos: QPoint) -> tuple[QDragMoveEvent, QDropEvent]:
    """What a drag over the list and a drop at `pos` send to it (Qt delivers a move and a drop only to the
    widget that accepted the drag's entry): the hover and drop events, to see whether they were accepted."""
    args = (Qt.DropAction.MoveAction, data, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(tree.viewport(), QDragEnterEvent(pos, *args))
    hover = QDragMoveEvent(pos, *args)
    QApplication.sendEvent(tree.viewport(), hover)
    drop = QDropEvent(QPointF(pos), *args)
    QApplication.sendEvent(tree.viewport(), drop)
    return hover, drop


def test_dragging_a_chat_onto_a_folder_moves_it_there(qtbot, make_window):
    window = make_window(start=False)
    side = Sidebar(window, "Alpha", "Beta")
    work = window.session.folders.create("Work").id
    tree = side.list.list
    folder_pos = tree.visualItemRect(side.list.folder_item(work)).center()

    dragged = tree.mimeData([side.list.item_of(side.ids["Alpha"])])  # what a drag of the item carries
    hover, drop = _drag(tree, dragged, folder_pos)
    assert hover.isAccepted() and drop.isAccepted()  # a folder takes a chat
    assert side.folder_of("Alpha") == work and side.in_folder("Work") == ["Alpha"]

    # Dropped on a chat in a folder: into that folder.
    beta = tree.mimeData([side.list.item_of(side.ids["Beta"])])
    _drag(tree, beta, tree.visualItemRect(side.list.item_of(side.ids["Alpha"])).center())
    assert side.folder_of("Beta") == work

    # Dropped below every item: out of any folder.
    below = QPoint(5, tree.viewport().height() - 3)
    assert tree.itemAt(below) is None
    _drag(tree, tree.mimeData([side.list.item_of(side.ids["Alpha"])]), below)
    assert side.folder_of("Alpha") is None and side.in_folder("Work") == ["Beta"]

    # Anything else dropped there is refused, and nothing moves.
    text = QMimeData()
    text.setText("Beta")
    folder_pos = tree.visualItemRect(side.list.folder_item(work)).center()
    hover, drop = _drag(tree, text, folder_pos)
    assert not hover.isAccepted() and not drop.isAccepted()
    assert side.folder_of("Alpha") is None


def test_folders_are_renamed_inline_and_deleted_without_their_chats(qtbot, make_window, monkeypatch):
    window = make_window(start=False)
    side = Sidebar(window, "Alpha", "Beta")
    folders = window.session.folders
    work = folders.create("Work").id
    folders.create("Home")
    folders.move(side.ids["Alpha"], work)
    folders.move(side.ids["Beta"], work)

    menu_action(side.menu(folder="Work"), "Rename").trigger()
    editor = QApplication.focusWidget()
    assert isinstance(editor, QLineEdit) and editor.text() == "Work"
    editor.selectAll()
    qtbot.keyClicks(editor, "Projects")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: any(f.name == "Projects" for f in side.store.list_folders()), timeout=WAIT_MS)
    assert side.list.folder_item(work).text(0) == "Projects"

    # A name taken already is refused: the status bar says why and the folder keeps its name.
    side.list.list.setCurrentItem(side.list.folder_item(work))
    side.list.rename_current()
    editor = QApplication.focusWidget()
    editor.selectAll()
    qtbot.keyClicks(editor, "home")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "exists already" in window.statusBar().currentMessage(), timeout=WAIT_MS)
    assert side.list.folder_item(work).text(0) == "Projects"

    asked = []
    monkeypatch.setattr(conversation_list, "confirm_delete_folder", lambda parent, name: asked.append(name) or False)
    menu_action(side.menu(folder="Projects"), "Delete…").trigger()
    assert asked == ["Projects"] and side.folder_of("Alpha") == work  # "No" keeps it
    monkeypatch.setattr(conversation_list, "confirm_delete_folder", lambda parent, name: True)
    menu_action(side.menu(folder="Projects"), "Delete…").trigger()
    assert [f.name for f in side.store.list_folders()] == ["Home"]
    assert side.folder_of("Alpha") is None and side.folder_of("Beta") is None  # the chats stay
    assert side.top_level() == ["Home", "Beta", "Alpha", "New chat"]  # folders first, then the newest chat first


def test_a_search_shows_only_the_folders_that_hold_a_chat_found(qtbot, make_window):
    window = make_window(start=False)
    side = Sidebar(window, "Alpha", "Beta")
    folders = window.session.folders
    work, home = folders.create("Work").id, folders.create("Home").id
    folders.move(side.ids["Alpha"], work)
    side.store.add_message(side.ids["Alpha"], "user", "How do I parse JSON?")
    side.list.list.collapseItem(side.list.folder_item(work))
    window.refresh_list()
    assert not side.list.folder_item(work).isExpanded()  # closed stays closed when drawn again
    assert side.list.folder_item(home) is not None  # an empty folder is shown: something to drop onto
    qtbot.keyClicks(side.list.search, "json")
    qtbot.waitUntil(lambda: side.list.ids() == [side.ids["Alpha"]], timeout=WAIT_MS)
    assert side.top_level() == ["Work"] and side.list.folder_item(work).isExpanded()
    side.list.search.clear()
    qtbot.waitUntil(lambda: len(side.list.ids()) == 3, timeout=WAIT_MS)
    assert not side.list.folder_item(work).isExpanded() and side.list.folder_item(home) is not None


def test_a_history_that_cannot_be_saved_to_offers_no_folder_changes(qtbot, make_window):
    window = make_window(start=False)
    side = Sidebar(window, "Alpha")
    side.list.set_editable(False)
    for menu in (side.menu("Alpha"), side.menu()):
        offered = [a.text() for a in menu.actions() if a.text()]
        assert offered and not [a.text() for a in menu.actions() if a.text() and a.isEnabled()], offered
    assert not side.list.list.dragEnabled()
    item = side.list.item_of(side.ids["Alpha"])
    assert not item.flags() & Qt.ItemFlag.ItemIsDragEnabled and not item.flags() & Qt.ItemFlag.ItemIsEditable

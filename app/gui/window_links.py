"""The window's wiring of branches and folders: what the chat view and the chat list ask for goes to the
session, and what the session says about versions and search hits comes back to the view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.gui.main_window import MainWindow


def link_branches(window: MainWindow) -> None:
    """‹ 2/3 ›, Edit message, Branch to new chat, the hover bar's Regenerate and Copy, and the search hit a
    chat was opened for."""
    controller, session, view = window.controller, window.session, window.chat
    controller.versions_changed.connect(view.set_versions)
    controller.search_hit.connect(view.show_hit)
    controller.busy_changed.connect(view.set_busy)
    view.version_requested.connect(session.show_version)
    view.edit_requested.connect(window.edit_message)
    view.branch_requested.connect(session.branch_to_new_chat)
    view.regenerate_requested.connect(session.regenerate)
    view.copied.connect(lambda text: window.statusBar().showMessage(text, 3000))


def link_folders(window: MainWindow) -> None:
    """Pins and folders of the chat list, saved through the session's ChatFolders."""
    chats, folders = window.conversations, window.session.folders
    chats.pin_requested.connect(folders.pin)
    chats.move_requested.connect(folders.move)
    chats.folder_delete_requested.connect(folders.delete)

    def create(name: str, move_chat: int | None) -> None:
        folder = folders.create(name)
        if folder is not None and move_chat is not None:
            folders.move(move_chat, folder.id)

    def rename(folder_id: int, name: str) -> None:
        if not folders.rename(folder_id, name):
            window.refresh_list()  # the name was refused (the status bar says why): the old one again

    chats.folder_create_requested.connect(create)
    chats.folder_rename_requested.connect(rename)

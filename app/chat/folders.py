"""ChatFolders: folders and pins of the chat list, for the window and the CLI alike (no Qt).

Each change is saved at once and the listener told (`conversations_changed`), so the sidebar
redraws; a history that cannot be written says so (`history_failed`) and nothing changes.
"""

from __future__ import annotations

from app.chat.listener import SessionListener
from app.services.history.store import ChatStore, Folder, StoreError


class ChatFolders:
    """Folders and pins of one history.

    Args:
        store: the chat history.
        listener: told when the list changed, or that the history could not be written.
    """

    def __init__(self, store: ChatStore, listener: SessionListener):
        self.store, self.listener = store, listener

    def list(self) -> list[Folder]:
        return self.store.list_folders()

    def create(self, name: str) -> Folder | None:
        """A new folder; None when the name is refused (the notice says why) or nothing can be saved."""
        return self._change(lambda: self.store.create_folder(name))

    def rename(self, folder_id: int, name: str) -> bool:
        return self._change(lambda: self.store.rename_folder(folder_id, name) or True) is not None

    def delete(self, folder_id: int) -> bool:
        """Delete a folder; its chats stay, in no folder."""
        return self._change(lambda: self.store.delete_folder(folder_id) or True) is not None

    def move(self, conversation_id: int, folder_id: int | None) -> bool:
        """Put a chat into a folder (None: out of any)."""
        return self._change(lambda: self.store.move_conversation(conversation_id, folder_id) or True) is not None

    def pin(self, conversation_id: int, pinned: bool = True) -> bool:
        """Pin a chat to the top of the list (or unpin it)."""
        return self._change(lambda: self.store.set_pinned(conversation_id, pinned) or True) is not None

    def _change(self, change):
        try:
            result = change()
        except ValueError as exc:
            self.listener.notice(str(exc))
            return None
        except StoreError:
            self.listener.history_failed()
            return None
        self.listener.conversations_changed()
        return result

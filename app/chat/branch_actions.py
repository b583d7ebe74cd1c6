"""What a chat's branches let you do: answer again beside the old reply, edit any of your messages,
step between versions (‹ 2/3 ›), copy a branch into a new chat. A part of ChatSession (session.py).

The store keeps every version (app/services/history/tree.py); these decide which branch the chat shows and start
the reply that continues it. Nothing here runs while a reply is being written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from app.chat.hints import BUSY_HINT
from app.chat.listener import SessionListener
from app.services.history.store import AudioRef, ChatStore, Conversation, ImageRef, Message, StoreError
from app.services.media.errors import StoredMediaError

if TYPE_CHECKING:
    from app.services.media.intake import CheckedAudio, PreparedAudio, PreparedImage


class BranchingSession(Protocol):
    """What the branch actions use of the ChatSession they are part of (session.py)."""

    store: ChatStore
    listener: SessionListener
    current: Conversation | None

    @property
    def busy(self) -> bool: ...

    def open_conversation(self, conversation_id: int, find: str = "") -> None: ...

    def _can_start(self) -> bool: ...

    def _start_reply(self, conversation_id: int) -> None: ...

    def _outgrows(self, messages: list[Message], text: str, editing: bool, edit_of: int | None = None,
                  images: Sequence = (), clips: Sequence = ()) -> bool: ...


class BranchActions:
    """ChatSession's branch actions (a base class of it: they use its store, listener and replies)."""

    def regenerate(self: BranchingSession) -> bool:
        """Answer the open conversation's last user message again; the reply it had stays, as another
        version of it (‹ 1/2 ›)."""
        if self.current is None or not self._can_start():
            return False
        messages = self.store.list_messages(self.current.id)
        if messages and messages[-1].role == "assistant":
            messages.pop()
        if not messages or messages[-1].role != "user":
            return False
        self.store.end_branch_at(messages[-1].id)
        self.open_conversation(self.current.id)
        self._start_reply(self.current.id)
        return True

    def edit_message(self: BranchingSession, message_id: int, text: str,
                     images: Sequence[PreparedImage | ImageRef] | None = None,
                     clips: Sequence[CheckedAudio | PreparedAudio | AudioRef] | None = None) -> bool:
        """Send `text` in place of one of your messages on the branch shown (not only the last): a new
        branch starts there and is answered; the old one stays, as the other version of that message. The
        new version carries `images` and `clips` (None: those the old one carried; () none)."""
        text = text.strip()
        if not text or self.current is None or not self._can_start():
            return False
        messages = self.store.list_messages(self.current.id)
        at = next((i for i, m in enumerate(messages) if m.id == message_id and m.role == "user"), None)
        if at is None:
            return False
        carried = messages[at].images if images is None else images
        sounds = messages[at].clips if clips is None else clips
        if self._outgrows(messages[:at], text, editing=True, edit_of=message_id, images=carried, clips=sounds):
            return False
        try:
            self.store.add_message(self.current.id, "user", text, parent_id=messages[at].parent_id,
                                   images=carried, clips=sounds)
        except (StoreError, StoredMediaError):  # the disk filled up: the history, or the images beside it
            self.listener.history_failed()
            return False
        self.open_conversation(self.current.id)
        self._start_reply(self.current.id)
        return True

    def edit_last_user_message(self: BranchingSession, text: str) -> bool:
        """`edit_message` of the last user message of the branch shown."""
        users = [m for m in self.store.list_messages(self.current.id) if m.role == "user"] if self.current else []
        return bool(users) and self.edit_message(users[-1].id, text)

    def show_version(self: BranchingSession, message_id: int) -> bool:
        """Show the branch through this version of a message (the newest one under it); not while a reply
        is being written."""
        if self.current is None or self.busy:
            if self.busy:
                self.listener.notice(BUSY_HINT)
            return False
        self.store.show_branch(message_id)
        self.open_conversation(self.current.id)
        return True

    def branch_to_new_chat(self: BranchingSession, message_id: int) -> Conversation | None:
        """A new chat holding the branch shown up to `message_id`, opened; None when that cannot be."""
        try:
            copy = self.store.copy_branch(message_id)
        except StoreError:
            self.listener.history_failed()
            return None
        if copy is None:
            return None
        self.listener.conversations_changed()
        self.open_conversation(copy.id)
        return copy

    def _show_hit(self: BranchingSession, message_id: int) -> None:
        """Show the branch through a search hit, unless the branch shown holds it already."""
        if all(m.id != message_id for m in self.store.list_messages(self.current.id)):
            try:
                self.store.show_branch(message_id)
            except StoreError:  # read-only: the branch shown stays
                pass

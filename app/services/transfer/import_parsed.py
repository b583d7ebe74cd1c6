"""What a file's reader hands the importer: one chat, checked, or a line saying why it cannot be one.

A chat's messages are kept compactly while it waits to be written (MessageList): a column per field,
and text that is not ASCII as UTF-8 bytes. A Python str of ASCII text with one emoji in it takes four
bytes a character; as UTF-8 it takes one, as in the file. A Message is made when it is asked for,
so a chat of 100,000 messages costs about its own text in memory, not several times it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from app.services.history.records import ROLES, AudioRef, FileRef, ImageRef
from app.services.history.sent_documents import SentDocuments
from app.services.history.store import MESSAGE_STATES, Conversation, Message
from app.services.history.tool_steps import ToolStep, steps_from_json, steps_to_json


class ChatImportError(ValueError):
    """A file that cannot be imported; one line for the user."""


class SkippedChat(ValueError):
    """One chat of the file that cannot be read; the message says why (the others are imported)."""


def pack(text: str) -> str | bytes:
    """`text` as kept while its chat waits: itself when ASCII, else UTF-8 bytes."""
    return text if text.isascii() else text.encode("utf-8")


def unpack(text: str | bytes) -> str:
    return text if isinstance(text, str) else text.decode("utf-8")


class MessageList(Sequence[Message]):
    """A chat's messages, numbered 1, 2, 3... in order (`Message.id`), each naming its parent by that number
    (None: a first message), for ChatStore.insert_conversation; each Message is made when asked for."""

    def __init__(self) -> None:
        self._roles, self._states, self._closed = bytearray(), bytearray(), bytearray()
        self._created, self._parents = array("d"), array("q")  # parent 0: none
        self._content: list[str | bytes] = []
        self._reasoning: list[str | bytes] = []
        self._stats: list[dict | None] = []
        self._steps: list[str | bytes] = []  # a reply's tool steps as their JSON ('' for none)
        self._images: dict[int, tuple[ImageRef, ...]] = {}  # by index: few messages carry images
        self._clips: dict[int, tuple[AudioRef, ...]] = {}  # ... or clips
        self._documents: dict[int, SentDocuments] = {}  # ... or the documents it was sent with
        self._files: dict[int, tuple[FileRef, ...]] = {}  # ... or its attached documents' originals

    def append(self, role: str, content: str | bytes, created: float, parent: int | None, *, state: str = "complete",
               stats: dict | None = None, reasoning: str = "", reasoning_closed: bool = True,
               tool_steps: tuple[ToolStep, ...] = (), images: tuple[ImageRef, ...] = (),
               clips: tuple[AudioRef, ...] = (), documents: SentDocuments | None = None,
               files: tuple[FileRef, ...] = ()) -> int:
        """Add a message (role and state as the store knows them, parent an earlier number; content a str, or
        packed already; tool steps checked already; images and clips in the media store already); its number."""
        if parent is not None and not 1 <= parent <= len(self):
            raise ValueError(f"parent {parent} is not an earlier message")
        self._roles.append(ROLES.index(role))
        self._states.append(MESSAGE_STATES.index(state))
        self._closed.append(int(reasoning_closed))
        self._created.append(created)
        self._parents.append(parent or 0)
        self._content.append(content if isinstance(content, bytes) else pack(content))
        self._reasoning.append(pack(reasoning) if reasoning else "")
        self._stats.append(stats)
        self._steps.append(pack(steps_to_json(tool_steps)))
        if images:
            self._images[len(self._content) - 1] = images
        if clips:
            self._clips[len(self._content) - 1] = clips
        if documents is not None:
            self._documents[len(self._content) - 1] = documents
        if files:
            self._files[len(self._content) - 1] = files
        return len(self)

    def __len__(self) -> int:
        return len(self._content)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return Message(index + 1, 0, ROLES[self._roles[index]], unpack(self._content[index]),
                       MESSAGE_STATES[self._states[index]], self._stats[index], self._created[index],
                       unpack(self._reasoning[index]), bool(self._closed[index]), self._parents[index] or None,
                       steps_from_json(unpack(self._steps[index])), self._images.get(index, ()),
                       self._clips.get(index, ()), self._documents.get(index), self._files.get(index, ()))

    def __iter__(self) -> Iterator[Message]:
        return (self[i] for i in range(len(self)))


@dataclass(slots=True, frozen=True)
class ParsedChat:
    """A chat as read from a file, ready for ChatStore.insert_conversation.

    `messages` name their parents by their numbers in the list; `leaf` is the number of the one ending the
    branch shown (None: the last); `folder` the name of its folder (None: in none; created when the
    history has no such folder).
    """

    uid: str
    conversation: Conversation
    messages: Sequence[Message] = field(default_factory=MessageList)
    leaf: int | None = None
    folder: str | None = None
    notes: tuple[str, ...] = ()  # what was mended on the way in (a time out of range, a bad setting)


def left_out_images(lines: list[str], noun: str = "image") -> str:
    """The note of images (or clips: `noun` "audio clip") an import left out of their messages, each named with
    why (the first few)."""
    shown = "; ".join(lines[:5]) + ("; …" if len(lines) > 5 else "")
    if len(lines) == 1:
        article = "an" if noun[0] in "aeiou" else "a"
        return f"{article} {noun} could not be imported and was left out of its message ({shown})"
    return f"{len(lines)} {noun}s could not be imported and were left out of their messages ({shown})"


def mended_times(count: int, what: str) -> str:
    """The note of `count` times of `what` that were no time (app/services/history/timestamps.py)."""
    return (f"{count} {what} time{'' if count == 1 else 's'} outside 1970–9999 or not a number: the import time "
            "is used")

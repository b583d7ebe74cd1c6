"""ChatStore: conversations, their messages, folders and presets in one SQLite file.

A chat's messages form a tree (tree.py): a regenerated reply or an edited message is kept
beside the one it replaces, and the chat shows one branch. The file lives under the user data
dir unless a path is given. It runs in WAL mode with `synchronous=FULL`, so a reply saved while
it streams survives a crash of the app or the machine; every change is one transaction. The schema is versioned (app/services/history/schema.py).
The images and audio clips messages carry are files of the media store beside it (app/services/media/store.py),
named by hash in `message_media` (message_media.py): a message's originals are put there just before the
message is saved, and a deletion that leaves a file unnamed ends with the store's collect.
A file that cannot be written opens read-only and one that cannot be read is refused with
what is needed to recover it (app/services/history/opening.py). No Qt here: the CLI and the server use the
same store.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from types import EllipsisType
from typing import TYPE_CHECKING

from app.services.history.file import HistoryFile, default_db_path
from app.services.history.message_media import (
    attach_chat_media,
    attach_message_media,
    chat_hashes,
    insert_media,
    named_hashes,
    unnamed,
)
from app.services.history.problems import (
    HistoryProblem,
    StoreDamagedError,
    StoreError,
    StoreTooNewError,
    StoreUnwritableError,
)
from app.services.history.records import (
    CONVERSATION_COLUMNS,
    DEFAULT_PRESET,
    DEFAULT_TITLE,
    MESSAGE_COLUMNS,
    MESSAGE_STATES,
    AudioRef,
    ChatSettings,
    Conversation,
    FileRef,
    Folder,
    ImageRef,
    Message,
    MessageState,
    Preset,
    Role,
    Version,
    conversation_of,
    message_of,
    preset_of,
    preset_row,
)
from app.services.history.schema import MIGRATIONS, SCHEMA_VERSION, migrate
from app.services.history.search import json_like_pattern, like_pattern, steps_match
from app.services.history.sent_documents import SentDocuments, documents_to_json
from app.services.history.tool_steps import ToolCallRecord, ToolStep, steps_to_json
from app.services.history.tree import branch, delete_subtree, first_hit, leaf_of, show_branch_of, versions
from app.services.media.store import COLLECT_GRACE_S, Collected, MediaStore

if TYPE_CHECKING:  # only their types: the store never decodes an image or a clip
    from app.services.media.intake import CheckedAudio, PreparedAudio, PreparedImage

log = logging.getLogger(__name__)

__all__ = [
    "FOLDER_NAME_LIMIT", "DEFAULT_PRESET", "DEFAULT_TITLE", "MESSAGE_STATES", "MIGRATIONS", "SCHEMA_VERSION", "AudioRef",
    "ChatSettings", "ChatStore",
    "Conversation", "Folder", "HistoryProblem", "ImageRef", "Message", "MessageState", "Preset", "Role", "StoreDamagedError", "StoreError",
    "StoreTooNewError", "StoreUnwritableError", "ToolCallRecord", "ToolStep", "Version", "default_db_path", "migrate",
]


# A folder's name: what the sidebar shows in one line.
FOLDER_NAME_LIMIT = 80


class ChatStore(HistoryFile):
    """Conversations, their messages (a tree of branches per chat), folders and presets.

    Attributes:
        media_grace_s: how long a media file no message names is kept after it was put (the media store's
            collect grace: a file put by another process for a message it has not saved yet); tests set 0.
    """

    media_grace_s: float = COLLECT_GRACE_S

    @property
    def media(self) -> MediaStore:
        """The media store of this history: `<history>-media/` beside its file."""
        return MediaStore.beside(self.path)

    # ------------------------------------------------------------ conversations

    def create_conversation(
        self, title: str = DEFAULT_TITLE, settings: ChatSettings | None = None
    ) -> Conversation:
        now = time.time()
        settings = settings or ChatSettings()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, ?)",
                (title, now, now, settings.to_json()),
            )
        return Conversation(cur.lastrowid, title, now, now, settings)

    def get_conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return conversation_of(row) if row else None

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE conversations SET title = ?, updated = ? WHERE id = ?",
                (title, time.time(), conversation_id),
            )

    def update_settings(self, conversation_id: int, settings: ChatSettings) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE conversations SET settings = ? WHERE id = ?", (settings.to_json(), conversation_id)
            )

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation and all its messages; media files it alone used are then collected."""
        with self._write() as db:
            used = chat_hashes(db, conversation_id)
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            freed = unnamed(db, used)
        if freed:
            self.collect_media()

    def list_conversations(self, query: str = "", folder_id: int | None | EllipsisType = ...) -> list[Conversation]:
        """Conversations, pinned first, then most recently updated first; `query` keeps those whose title
        or any message of any branch contains it (case-insensitive for ASCII; in a reply's tool steps, the
        texts and the calls' names and arguments, not their results: search.py); `folder_id` those in that
        folder (None: in none; left out: in any)."""
        where, args = [], []
        if query.strip():
            where.append("(title LIKE ?1 ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m"
                         " WHERE m.conversation_id = conversations.id AND (m.content LIKE ?1 ESCAPE '\\'"
                         f" OR {steps_match('m.tool_steps', '?1', '?2')})))")
            args += [like_pattern(query), json_like_pattern(query)]
        if folder_id is None:
            where.append("folder_id IS NULL")
        elif folder_id is not ...:
            where.append(f"folder_id = ?{len(args) + 1}")
            args.append(folder_id)
        sql = f"SELECT {CONVERSATION_COLUMNS} FROM conversations"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY pinned DESC, updated DESC, id DESC"
        return [conversation_of(row) for row in self._db.execute(sql, args)]

    def conversation_uid(self, conversation_id: int) -> str | None:
        """The chat's stable id (a UUID kept across export and import); None when there is no such chat."""
        row = self._db.execute("SELECT external_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        return row[0] if row else None

    def find_conversation_by_uid(self, uid: str) -> Conversation | None:
        row = self._db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE external_id = ?", (uid,)
        ).fetchone()
        return conversation_of(row) if row else None

    def insert_conversation(self, conversation: Conversation, messages: list[Message], uid: str,
                            leaf_id: int | None = None, *, linear: bool = False) -> int | None:
        """Add a whole chat as given (title, times, settings, folder, pin; messages with their states, stats,
        reasoning, tool steps, images, clips and times) under `uid`, in one transaction. Messages name their parents by the ids they
        have in `messages` (each after its parent; None: a first message), or with `linear` form one line,
        each under the one before; `leaf_id` names the branch shown (None: the last message's). Returns the
        chat's id, or None when a chat with `uid` is there already (then nothing is added).

        Raises:
            ValueError: an unknown state, or a parent that is not an earlier message of the list.
        """
        for message in messages:
            _check_state(message.state)
        c = conversation
        with self._write() as db:
            if db.execute("SELECT 1 FROM conversations WHERE external_id = ?", (uid,)).fetchone():
                return None
            cid = db.execute(
                "INSERT INTO conversations (title, created, updated, settings, external_id, folder_id, pinned)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (c.title, c.created, c.updated, c.settings.to_json(), uid, c.folder_id, int(c.pinned)),
            ).lastrowid
            new_ids: dict[int, int] = {}
            last: int | None = None
            for m in messages:
                if linear:
                    parent = last
                elif m.parent_id is None:
                    parent = None
                elif m.parent_id in new_ids:
                    parent = new_ids[m.parent_id]
                else:
                    raise ValueError(f"message {m.id} follows {m.parent_id}, which is not an earlier message")
                last = db.execute(
                    "INSERT INTO messages (conversation_id, role, content, state, stats, created, reasoning,"
                    " reasoning_closed, parent_id, tool_steps, documents) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (cid, m.role, m.content, m.state, json.dumps(m.stats) if m.stats is not None else None,
                     m.created, m.reasoning, int(m.reasoning_closed), parent, steps_to_json(m.tool_steps),
                     documents_to_json(m.documents)),
                ).lastrowid
                if m.images or m.clips or m.files:
                    insert_media(db, last, m.images, m.clips, m.files)
                new_ids[m.id] = last
            leaf = new_ids.get(leaf_id, last) if leaf_id is not None else last
            db.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?", (leaf, cid))
        return cid

    def copy_branch(self, message_id: int, title: str | None = None) -> Conversation | None:
        """A new chat holding the branch up to `message_id` (its settings too, its replies' tool steps, its
        messages' images and clips: the same files, named once more), under a new id; None when there is no such message."""
        source = self.get_message(message_id)
        if source is None:
            return None
        original = self.get_conversation(source.conversation_id)
        path = branch(self._db, source.conversation_id, leaf=message_id)
        now = time.time()
        copy = Conversation(0, title or f"{original.title} (branch)", now, now, original.settings, original.folder_id)
        uid = str(uuid.uuid4())
        cid = self.insert_conversation(copy, path, uid, linear=True)
        return self.get_conversation(cid) if cid is not None else None

    # ------------------------------------------------------------ messages

    def add_message(
        self, conversation_id: int, role: Role, content: str, state: MessageState = "complete",
        parent_id: int | None | EllipsisType = ..., *, images: Sequence[PreparedImage | ImageRef] = (),
        clips: Sequence[PreparedAudio | CheckedAudio | AudioRef] = (), documents: SentDocuments | None = None,
        files: Sequence[FileRef] = (),
    ) -> Message:
        """Add a message after `parent_id` (left out: the end of the branch the chat shows; None: as a first
        message), and show the branch it ends.

        Args:
            images: what the message carries, in order. A PreparedImage's original bytes are put into the
                media store first (the same bytes are stored once, however many messages carry them); an
                ImageRef names a file there already (an edited message keeping the images of the one it
                replaces: pass `old.images`).
            clips: its audio clips, in order, likewise (a PreparedAudio, a CheckedAudio or an AudioRef).
            documents: the documents' block it is sent with (kept as sent: sent_documents.py).
            files: the originals of its attached documents, in the media store already (put when attached).

        Raises:
            StoreUnwritableError: the history is read-only (nothing is stored, not even an image).
            StoredMediaError: an image or a clip could not be written into the media store (disk full...):
                the message is not added.
        """
        _check_state(state)
        refs = self._store_media(images, ImageRef)
        clip_refs = self._store_media(clips, AudioRef)
        now = time.time()
        with self._write() as db:
            parent = leaf_of(db, conversation_id) if parent_id is ... else parent_id
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, state, created, parent_id, documents)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, role, content, state, now, parent, documents_to_json(documents)),
            )
            if refs or clip_refs or files:
                insert_media(db, cur.lastrowid, refs, clip_refs, tuple(files))
            db.execute("UPDATE conversations SET updated = ?, leaf_id = ? WHERE id = ?",
                       (now, cur.lastrowid, conversation_id))
        return Message(cur.lastrowid, conversation_id, role, content, state, None, now, parent_id=parent, images=refs,
                       clips=clip_refs, documents=documents, files=tuple(files))

    def _store_media(self, items: Sequence, ref_type: type[ImageRef] | type[AudioRef]) -> tuple:
        """The references (`ref_type`) of `items`, the originals of prepared ones put into the media store (just
        before the message that names them is saved: the store's grace period spares them meanwhile)."""
        if not items:
            return ()
        if self.problem is not None:  # a read-only history: no file is left behind for a message never saved
            raise StoreUnwritableError(self.problem)
        refs = []
        for item in items:
            if not isinstance(item, ref_type):
                self.media.put(item.original, item.suffix)
                item = ref_type.of(item)
            refs.append(item)
        return tuple(refs)

    def update_message_content(
        self, message_id: int, content: str, reasoning: str | None = None, reasoning_closed: bool = True
    ) -> None:
        """Save the text of a message (called every few hundred ms while a reply streams), and of its
        reasoning when given (None leaves what is stored)."""
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, reasoning = coalesce(?, reasoning),"
                " reasoning_closed = coalesce(?, reasoning_closed) WHERE id = ?",
                (content, *_reasoning_values(reasoning, reasoning_closed), message_id),
            )

    def update_message_tool_steps(self, message_id: int, steps: tuple[ToolStep, ...], content: str = "") -> None:
        """Save a streaming reply's tool steps and its text so far (what it wrote after the last step), in one
        transaction: called when a step begins (the text streamed until then is that step's text now, so
        `content` starts again) and when a call changes (permitted, running, answered)."""
        with self._write() as db:
            db.execute("UPDATE messages SET tool_steps = ?, content = ? WHERE id = ?",
                       (steps_to_json(steps), content, message_id))

    def finish_message(
        self, message_id: int, content: str, state: MessageState, stats: dict | None = None,
        reasoning: str | None = None, reasoning_closed: bool = True, *,
        tool_steps: tuple[ToolStep, ...] | None = None,
    ) -> None:
        """Store the final text, state and stats of a reply, and its reasoning and tool steps when given
        (None leaves what is stored: the steps saved while it streamed)."""
        _check_state(state)
        stats_json = json.dumps(stats) if stats is not None else None
        steps_json = steps_to_json(tool_steps) if tool_steps is not None else None
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, state = ?, stats = ?, reasoning = coalesce(?, reasoning),"
                " reasoning_closed = coalesce(?, reasoning_closed), tool_steps = coalesce(?, tool_steps) WHERE id = ?",
                (content, state, stats_json, *_reasoning_values(reasoning, reasoning_closed), steps_json, message_id),
            )

    def delete_message(self, message_id: int) -> None:
        """Delete a message and the branch under it; the chat then shows the newest branch left there. Media
        files only they used are then collected."""
        with self._write() as db:
            row = db.execute("SELECT conversation_id FROM messages WHERE id = ?", (message_id,)).fetchone()
            used = chat_hashes(db, row[0]) if row else set()
            delete_subtree(db, message_id)
            freed = unnamed(db, used)
        if freed:
            self.collect_media()

    def collect_media(self, grace_s: float | None = None) -> Collected | None:
        """Remove the files of the media store that no message names and that were put more than `grace_s`
        seconds ago (None: `media_grace_s`); what was removed, or None when nothing was: the history is
        shown read-only (perhaps an empty stand-in for a damaged file, whose messages name nothing: its files
        are not touched), or the folder could not be swept (logged: a file left behind costs space, never a
        chat). Run after a deletion that left a file unnamed; the window may also run it now and then (at
        start), for the files a deletion spared as too young."""
        if self.problem is not None:
            return None
        grace = self.media_grace_s if grace_s is None else grace_s
        try:
            return self.media.collect(named_hashes(self._db), grace_s=grace)
        except OSError as exc:
            log.warning("Could not remove unused media files from %s: %s", self.media.folder, exc)
            return None

    def get_message(self, message_id: int) -> Message | None:
        """The message with `message_id` (its images and clips too); None when there is none."""
        row = self._db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)).fetchone()
        return attach_message_media(self._db, message_of(row)) if row else None

    def message_count(self, conversation_id: int) -> int:
        """Messages of the chat in all its branches."""
        row = self._db.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()
        return row[0]

    def list_messages(self, conversation_id: int) -> list[Message]:
        """The branch the chat shows, from its first message to its last (what the model is sent)."""
        return branch(self._db, conversation_id)

    def all_messages(self, conversation_id: int) -> list[Message]:
        """Every message of every branch of the chat, each after the one it follows (by id), with its media."""
        rows = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        )
        return attach_chat_media(self._db, conversation_id, [message_of(row) for row in rows])

    def leaf_id(self, conversation_id: int) -> int | None:
        """The message the branch the chat shows ends at."""
        return leaf_of(self._db, conversation_id)

    def versions(self, conversation_id: int) -> dict[int, Version]:
        """Each message's place among its versions (‹ 2/3 ›), by message id."""
        return versions(self._db, conversation_id)

    def end_branch_at(self, message_id: int) -> None:
        """Show the branch up to `message_id` and no further (a reply to it is about to be written again)."""
        with self._write() as db:
            db.execute("UPDATE conversations SET leaf_id = ?1 WHERE id = (SELECT conversation_id FROM messages"
                       " WHERE id = ?1)", (message_id,))

    def show_branch(self, message_id: int) -> None:
        """Show the newest branch through `message_id` in its chat (a version picked, a search hit opened)."""
        with self._write() as db:
            show_branch_of(db, message_id)

    def find_in_conversation(self, conversation_id: int, query: str) -> int | None:
        """The oldest message of any branch of the chat containing `query` (case-insensitive for ASCII) in its
        text, its reasoning or its tool steps (their texts and reasoning, the calls' names and arguments; not
        their results: search.py)."""
        if not query.strip():
            return None
        return first_hit(self._db, conversation_id, like_pattern(query), json_like_pattern(query))

    # ------------------------------------------------------------ folders and pins

    def list_folders(self) -> list[Folder]:
        rows = self._db.execute("SELECT id, name, created FROM folders ORDER BY name COLLATE NOCASE")
        return [Folder(*row) for row in rows]

    def create_folder(self, name: str) -> Folder:
        """A new folder; ValueError for an empty or too long name, or one taken (case-insensitively)."""
        name = _folder_name(name)
        now = time.time()
        with self._write() as db:
            if db.execute("SELECT 1 FROM folders WHERE name = ?", (name,)).fetchone():
                raise ValueError(f"A folder named {name!r} exists already.")
            cur = db.execute("INSERT INTO folders (name, created) VALUES (?, ?)", (name, now))
        return Folder(cur.lastrowid, name, now)

    def rename_folder(self, folder_id: int, name: str) -> None:
        name = _folder_name(name)
        with self._write() as db:
            if db.execute("SELECT 1 FROM folders WHERE name = ? AND id != ?", (name, folder_id)).fetchone():
                raise ValueError(f"A folder named {name!r} exists already.")
            db.execute("UPDATE folders SET name = ? WHERE id = ?", (name, folder_id))

    def delete_folder(self, folder_id: int) -> None:
        """Delete a folder; its chats stay, in no folder."""
        with self._write() as db:
            db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))

    def move_conversation(self, conversation_id: int, folder_id: int | None) -> None:
        """Put a chat in a folder (None: in none); ValueError for a folder that does not exist."""
        with self._write() as db:
            if folder_id is not None and not db.execute("SELECT 1 FROM folders WHERE id = ?", (folder_id,)).fetchone():
                raise ValueError(f"There is no folder {folder_id}.")
            db.execute("UPDATE conversations SET folder_id = ? WHERE id = ?", (folder_id, conversation_id))

    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        """Pin a chat to the top of the list, or unpin it."""
        with self._write() as db:
            db.execute("UPDATE conversations SET pinned = ? WHERE id = ?", (int(pinned), conversation_id))

    # ------------------------------------------------------------ presets

    def list_presets(self) -> list[Preset]:
        rows = self._db.execute("SELECT name, settings, pinned FROM presets ORDER BY name COLLATE NOCASE")
        return [preset_of(row) for row in rows]

    def get_preset(self, name: str) -> Preset | None:
        row = self._db.execute("SELECT name, settings, pinned FROM presets WHERE name = ?", (name,)).fetchone()
        return preset_of(row) if row else None

    def save_preset(self, preset: Preset) -> None:
        """Add `preset`, or replace the one of the same name."""
        if not preset.name.strip():
            raise ValueError("A preset needs a name.")
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO presets VALUES (?, ?, ?)", preset_row(preset))

    def delete_preset(self, name: str) -> bool:
        with self._write() as db:
            return db.execute("DELETE FROM presets WHERE name = ?", (name,)).rowcount > 0

    def pinned_prompts(self) -> tuple[str, ...]:
        """System prompts of the pinned presets, for the engine to prefill at load."""
        return tuple(p.system_prompt for p in self.list_presets() if p.pinned and p.system_prompt)


def _reasoning_values(reasoning: str | None, closed: bool) -> tuple[str | None, int | None]:
    """The reasoning columns' new values; (None, None) keeps what they hold."""
    return (None, None) if reasoning is None else (reasoning, int(closed))


def _folder_name(name: str) -> str:
    """A folder's name as kept: one line, trimmed; ValueError when empty or over FOLDER_NAME_LIMIT."""
    name = " ".join(name.split())
    if not name:
        raise ValueError("A folder needs a name.")
    if len(name) > FOLDER_NAME_LIMIT:
        raise ValueError(f"A folder's name is at most {FOLDER_NAME_LIMIT} characters.")
    return name


def _check_state(state: str) -> None:
    if state not in MESSAGE_STATES:
        raise ValueError(f"unknown message state {state!r}")

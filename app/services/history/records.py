"""What the chat history holds: conversations, messages, presets and their settings, and their rows."""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from app.services.chat_defaults import (
    DEFAULT_CONTEXT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_SYSTEM_PROMPT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
)
from app.services.history.sent_documents import SentDocuments, SentDocumentsError, documents_from_json
from app.services.history.settings_fields import (
    CHAT_FIELDS,
    DEFAULT_TOOL_STEP_CAP,
    LOAD_KEYS,
    SPECULATION_FIELDS,
    TORCH_FIELDS,
    parse_settings,
)
from app.services.history.tool_steps import ToolStep, ToolStepsError, steps_from_json
from app.services.load_settings import LoadSettings
from app.services.media.sniff import AUDIO_SUFFIXES, DOCUMENT_SUFFIXES, SUFFIXES
from engine.protocol import Reasoning

if TYPE_CHECKING:  # intake imports the media store, which imports this package: no cycle at run time
    from app.services.media.intake import CheckedAudio, PreparedAudio, PreparedImage

Role = Literal["system", "user", "assistant"]
ToolChoice = Literal["auto", "required"]
MessageState = Literal["complete", "streaming", "interrupted", "cancelled"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")
MESSAGE_STATES: tuple[str, ...] = ("complete", "streaming", "interrupted", "cancelled")
DEFAULT_TITLE = "New chat"

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ChatSettings:
    """Per-conversation generation settings."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    # What a model load depends on: context (and Auto's cap), KV cache type, flash attention, speculative
    # decoding (either engine; its draft_path is kept while another mode is chosen) and the PyTorch
    # engine's options (a model folder; the GGUF backend ignores them). load_settings_of
    # (app/chat/load_settings.py) makes of it what a load is asked for; pinned_prompts and n_parallel
    # are the load's, not the chat's: they keep their defaults here and are not stored.
    load: LoadSettings = LoadSettings(n_ctx=DEFAULT_CONTEXT)
    # A reasoning model's thinking, sent with each reply (ReplyShape): no reload when it changes.
    reasoning: Reasoning = "auto"
    think_budget: int | None = None  # the most reasoning tokens; None: no cap
    # Tools (MCP): the servers on in this chat (none: the model is offered no tools), the tools the user
    # allowed "Always in this chat" (asked no more), the most tool steps a reply takes before it answers,
    # and whether a reply's first request must call a tool ("required") or may ("auto"; TOOL_CHOICES).
    tool_servers: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] = ()
    tool_step_cap: int = DEFAULT_TOOL_STEP_CAP
    tool_choice: ToolChoice = "auto"
    # Documents (issue 36): the most tokens a message's documents may take (None: all the context leaves after
    # the conversation and the reply), and the knowledge index the chat answers from (None: none).
    document_budget: int | None = None
    knowledge: str | None = None

    def to_json(self) -> str:
        # Stored flat, as every release stored them (and still reads them): the load's fields, its
        # TorchOptions' and its SpeculativeOptions' (under their stored keys) beside the chat's own,
        # key for key as parse_settings reads them.
        load = self.load
        data = {key: getattr(load if key in LOAD_KEYS else self, key) for key in CHAT_FIELDS}
        data.update({key: getattr(load.torch, key) for key in TORCH_FIELDS})
        data.update({key: getattr(load.speculation, name) for name, (key, _) in SPECULATION_FIELDS.items()})
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str | None) -> ChatSettings:
        """Settings from stored JSON; unknown keys are dropped, missing ones get defaults."""
        return cls(**_settings_fields(text or ""))


@functools.lru_cache(maxsize=256)
def _settings_fields(text: str) -> dict:
    """ChatSettings' fields from stored JSON (never changed by the caller), each checked for its type and
    range (app/services/history/settings_fields.py): a bad one gets its default. Most chats hold the same few
    settings: read once each, 5,000 chats list in 10 ms instead of 60 (the sidebar reads them all)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}  # a damaged value: the defaults, as for a chat that never changed its settings
    return parse_settings(data).fields


@dataclass(slots=True, frozen=True)
class Preset:
    """A named system prompt with its sampling settings; a pinned one is prefilled at model load."""

    name: str
    system_prompt: str
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    pinned: bool = False

    def apply_to(self, settings: ChatSettings) -> ChatSettings:
        """`settings` with this preset's prompt and sampling (load settings unchanged)."""
        return replace(
            settings,
            system_prompt=self.system_prompt,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
        )


DEFAULT_PRESET = Preset("Tailor", DEFAULT_SYSTEM_PROMPT, pinned=True)


@dataclass(slots=True)
class Conversation:
    id: int
    title: str
    created: float
    updated: float
    settings: ChatSettings = field(default_factory=ChatSettings)
    folder_id: int | None = None  # the folder it is in (None: none)
    pinned: bool = False  # listed first


@dataclass(slots=True, frozen=True)
class Folder:
    id: int
    name: str
    created: float


@dataclass(slots=True, frozen=True)
class ImageRef:
    """An image a stored message carries: the file of the media store beside the history that holds its
    original bytes (app/services/media/store.py), and what is shown of it without opening that file.

    Attributes:
        sha256: hex digest of the original bytes: the file's name in the store, checked when it is read.
        format: PNG, JPEG, WEBP, GIF or BMP, as the intake found it (the stored file's suffix follows).
        name: the name it came with ("photo.jpg", "pasted image"), for the transcript and exports.
        width, height: its full size, upright (not the size a projector was sent).
    """

    sha256: str
    format: str
    name: str
    width: int
    height: int

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".png"...); "" for a format this release does not know."""
        return SUFFIXES.get(self.format, "")

    @classmethod
    def of(cls, image: PreparedImage) -> ImageRef:
        """The reference to a prepared image (its full size, not the scaled size it is sent at)."""
        return cls(image.sha256, image.format, image.name, image.full_width, image.full_height)


@dataclass(slots=True, frozen=True)
class FileRef:
    """A document a stored message was sent with, its original kept in the media store as it was attached (the
    text the model read is the message's `documents`).

    Attributes:
        sha256: hex digest of the original bytes: the file's name in the store, checked when it is read.
        format: PDF, DOCX, MD, HTML, CSV or TXT (sniff.DOCUMENT_SUFFIXES: the stored file's suffix follows).
        name: the name it was attached under ("report.pdf"), for the transcript and exports.
    """

    sha256: str
    format: str
    name: str

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".pdf"...); "" for a format this release does not know."""
        return DOCUMENT_SUFFIXES.get(self.format, "")


@dataclass(slots=True, frozen=True)
class AudioRef:
    """An audio clip a stored message carries: the file of the media store that holds its original bytes (a
    WAV file), and what is shown of it without opening that file.

    Attributes:
        sha256: hex digest of the original bytes: the file's name in the store, checked when it is read.
        format: "WAV", as the intake found it (the stored file's suffix follows).
        name: the name it came with ("question.wav"), for the transcript and exports.
        seconds: its length, as the intake decoded it.
    """

    sha256: str
    format: str
    name: str
    seconds: float

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".wav"); "" for a format this release does not know."""
        return AUDIO_SUFFIXES.get(self.format, "")

    @classmethod
    def of(cls, clip: PreparedAudio | CheckedAudio) -> AudioRef:
        return cls(clip.sha256, clip.format, clip.name, clip.seconds)


@dataclass(slots=True)
class Message:
    id: int
    conversation_id: int
    role: Role
    content: str
    state: MessageState
    stats: dict | None
    created: float
    # An assistant reply's reasoning, apart from its answer (`content`), which alone is sent back to
    # the model; reasoning_closed is False when the reply ended while it still thought (cut off).
    reasoning: str = ""
    reasoning_closed: bool = True
    # The message it follows in its chat's tree (None: a first message); a regenerated reply or an
    # edited message is a sibling of the one it replaces (a version: ‹ 2/3 ›).
    parent_id: int | None = None
    # A reply that called tools: its steps, before `content` (what it wrote after the last of them).
    tool_steps: tuple[ToolStep, ...] = ()
    # The images a user message carries, in the order they were attached (message_media.py).
    images: tuple[ImageRef, ...] = ()
    # Its audio clips, likewise (sent after its images).
    clips: tuple[AudioRef, ...] = ()
    # The documents it was sent with: the block the model read before `content` (sent_documents.py), and the
    # attached files' originals, kept (message_media.py).
    documents: SentDocuments | None = None
    files: tuple[FileRef, ...] = ()


@dataclass(slots=True, frozen=True)
class Version:
    """Where a message stands among its versions (the messages under the same parent): `index` of `count`,
    from 1; `ids` the versions' ids, oldest first."""

    index: int
    count: int
    ids: tuple[int, ...]


# The columns `message_of` reads, in its order.
MESSAGE_COLUMNS = ("id, conversation_id, role, content, state, stats, created, reasoning, reasoning_closed, parent_id,"
                   " tool_steps, documents")
# The columns `conversation_of` reads, in its order.
CONVERSATION_COLUMNS = "id, title, created, updated, settings, folder_id, pinned"


def conversation_of(row: tuple) -> Conversation:
    """A Conversation from a row of CONVERSATION_COLUMNS."""
    return Conversation(row[0], row[1], row[2], row[3], ChatSettings.from_json(row[4]), row[5], bool(row[6]))


def message_of(row: tuple) -> Message:
    """A Message from a row of MESSAGE_COLUMNS."""
    stats = json.loads(row[5]) if row[5] else None
    return Message(row[0], row[1], row[2], row[3], row[4], stats, row[6], row[7] or "", bool(row[8]), row[9],
                   _steps_of(row[0], row[10]) if row[10] else (), documents=_documents_of(row[0], row[11]))


def _steps_of(message_id: int, text: object) -> tuple[ToolStep, ...]:
    """A message's tool steps from its column; a damaged value (not JSON, not steps) reads as none, with a
    warning: the message, its text and the chat around it stay readable."""
    try:
        if not isinstance(text, str):
            raise ToolStepsError(f"the tool steps are {type(text).__name__}, not text")
        return steps_from_json(text)
    except ToolStepsError as exc:
        log.warning("The tool steps of message %s cannot be read (%s): it is shown without them", message_id, exc)
        return ()


def _documents_of(message_id: int, text: object) -> SentDocuments | None:
    """A message's documents from its column; a damaged value reads as none, with a warning (as tool steps)."""
    if not text:
        return None
    try:
        if not isinstance(text, str):
            raise SentDocumentsError(f"the documents are {type(text).__name__}, not text")
        return documents_from_json(text)
    except SentDocumentsError as exc:
        log.warning("The documents of message %s cannot be read (%s): it is shown without them", message_id, exc)
        return None


def preset_row(preset: Preset) -> tuple[str, str, int]:
    """The `presets` row of `preset`: name, its settings as JSON, pinned."""
    fields = {k: getattr(preset, k) for k in ("system_prompt", "temperature", "top_p", "max_tokens")}
    return preset.name, json.dumps(fields), int(preset.pinned)


def preset_of(row: tuple) -> Preset:
    """A Preset from `name, settings, pinned`."""
    data = json.loads(row[1])
    known = {k: v for k, v in data.items() if k in Preset.__dataclass_fields__ and k not in ("name", "pinned")}
    return Preset(name=row[0], pinned=bool(row[2]), **known)

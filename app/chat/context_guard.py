"""Whether a conversation still fits the context it will be answered in, checked before a message is sent.

The engine refuses a prompt longer than its context ("context_overflow") and ends a reply that
reaches the end of the context early (finish "length"), so a conversation that outgrew its context
would fail or be cut short only after it was sent. The window checks first, with these figures.

There is no engine request that counts tokens ahead of a generate. The count here is the
engine's own where it has one: the prompt and reply tokens of the last reply with stats (what
llama.cpp tokenized, template included). The messages after it (the new one, an edited one) are
estimated by `estimate_tokens`, which errs high: it warns early rather than let a prompt be cut.
No Qt here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.chat.media_tokens import ClipTokenCount, ImageTokenCount
from app.services.history.store import Message

Size = tuple[int, int]  # an image's width and height

MESSAGE_OVERHEAD = 8  # role markers and separators a chat template adds around each message
# Letter runs, single digits, whitespace runs, single ASCII symbols, single non-ASCII characters.
_PIECE = re.compile(r"[A-Za-z]+|[0-9]|[ \t\r\n]+|[\x21-\x7e]|[^\x00-\x7f]")
_MARGIN = 1.1


def estimate_tokens(text: str) -> int:
    """Tokens `text` takes as one chat message, estimated high.

    By kind of text, as a small English vocabulary splits it (SmolLM2's 49k; larger vocabularies
    split less, so the estimate only runs higher): words at about 3.5 letters a token (capitals
    count double: "THE" is split more), each digit and ASCII symbol one token, a single space
    none (it joins the next word), other whitespace 4 characters a token, and non-ASCII text
    3/4 of a token per UTF-8 byte; then 10 % more. Against the starter model's tokenizer it
    comes out 1.0–1.2 times the real count for French, German, Chinese, digits and hex, and
    1.5–1.9 times for English prose, code and Russian (tests/app/chat/test_context_guard.py).
    """
    n = 0.0
    for match in _PIECE.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii() and first.isalpha():
            n += math.ceil((len(piece) + sum(c.isupper() for c in piece[1:])) / 3.5)
        elif first in " \t\r\n":
            n += 0 if piece == " " else math.ceil(len(piece) / 4)
        elif first.isascii():  # a digit or a symbol
            n += 1
        else:
            n += len(piece.encode("utf-8")) * 3 / 4
    return math.ceil(n * _MARGIN) + MESSAGE_OVERHEAD


def conversation_tokens(messages: Sequence[Message], system_prompt: str, new_text: str,
                        new_images: Sequence[Size] = (), image_tokens: ImageTokenCount | None = None,
                        new_clips: Sequence[float] = (), clip_tokens: ClipTokenCount | None = None,
                        new_documents: int = 0) -> int:
    """Tokens of the prompt that answers `new_text` (with images of `new_images` sizes, clips of `new_clips`
    seconds) after `messages`: counted by the engine up to the last reply that has stats, estimated after it
    (or throughout, when no reply has them). Images count by `image_tokens` (the loaded projector's), clips
    by `clip_tokens`; without one, not at all: a model that cannot see (or hear) is sent none."""
    known, rest = 0, list(messages)
    for i in range(len(messages) - 1, -1, -1):
        stats = messages[i].stats or {}
        if messages[i].role == "assistant" and stats.get("prompt_tokens") is not None:
            # The prompt already held the system prompt; the reply's own end-of-turn marker is not counted.
            known = stats["prompt_tokens"] + stats.get("gen_tokens", 0) + MESSAGE_OVERHEAD
            rest = list(messages[i + 1 :])
            break
    else:
        if system_prompt.strip():
            known = estimate_tokens(system_prompt)
    # A message sent with documents was read with their block before it, which was counted when it was made
    # (sent_documents.py): that count, not an estimate, so a block made to fit the context passes here.
    text = sum(estimate_tokens(m.content) for m in rest if m.content) + estimate_tokens(new_text)
    text += sum(m.documents.tokens for m in rest if m.documents) + new_documents
    media = 0
    if image_tokens is not None:
        sizes = [(i.width, i.height) for m in rest for i in m.images] + list(new_images)
        media += sum(image_tokens(w, h) for w, h in sizes)
    if clip_tokens is not None:
        lengths = [c.seconds for m in rest for c in m.clips] + list(new_clips)
        media += sum(clip_tokens(seconds) for seconds in lengths)
    return known + text + media


@dataclass(slots=True, frozen=True)
class ContextShortfall:
    """A message held back because the conversation would outgrow the context.

    Attributes:
        text: The message, as typed (it stays in the composer).
        editing: It replaces one of the user's messages (`edit_of`) instead of being a new one.
        needed: Tokens the reply needs: the prompt (see `conversation_tokens`) and its max tokens.
        n_ctx: The context it would be answered in.
        max_context: The largest context that fits this model here (the plan's); None when unknown.
        images: The images it carries, as `carried` gave them (sizes alone go into `needed`).
        clips: The audio clips it carries (CheckedAudio, PreparedAudio or AudioRef), likewise.
    """

    text: str
    editing: bool
    needed: int
    n_ctx: int
    max_context: int | None
    edit_of: int | None = None  # the message it replaces, when editing
    images: tuple = ()  # the images it carries (PreparedImage or ImageRef), sent with it after a reload
    clips: tuple = ()  # the clips it carries (CheckedAudio, PreparedAudio or AudioRef), likewise
    documents: object = None  # the documents' block it goes with (a SentDocuments), likewise

    @property
    def can_reload(self) -> bool:
        """Whether a reload with `max_context` would hold the conversation."""
        return self.max_context is not None and self.max_context >= self.needed and self.max_context > self.n_ctx


def shortfall(
    messages: Sequence[Message], system_prompt: str, text: str, max_tokens: int, n_ctx: int,
    max_context: int | None = None, editing: bool = False, edit_of: int | None = None,
    images: Sequence[Size] = (), image_tokens: ImageTokenCount | None = None, carried: tuple = (),
    clips: Sequence[float] = (), clip_tokens: ClipTokenCount | None = None, carried_clips: tuple = (),
    documents: int = 0,
) -> ContextShortfall | None:
    """The shortfall of answering `text` (and `images`, and clips of `clips` seconds) with up to `max_tokens`
    in `n_ctx` tokens; None when it fits."""
    needed = conversation_tokens(messages, system_prompt, text, images, image_tokens, clips, clip_tokens,
                                 documents) + max_tokens
    if needed <= n_ctx:
        return None
    return ContextShortfall(text, editing, needed, n_ctx, max_context, edit_of, carried, carried_clips)

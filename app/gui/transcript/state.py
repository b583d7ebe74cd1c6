"""What the chat view shows, held in one place: the view writes it as it renders; its helpers (the message
actions, the marks, the hover bar) read it. Also the signals those helpers emit for the view."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from PySide6.QtCore import SignalInstance
from PySide6.QtGui import QTextCursor

from app.gui.transcript.reasoning_block import LiveReasoning, ReasoningBlock
from app.gui.transcript.tool_card import ToolCard
from app.services.history.store import Message


class TranscriptRequests(Protocol):
    """What the chat view asks of the window (its signals), emitted by its helpers too."""

    edit_requested: SignalInstance  # (int) edit this message of yours
    branch_requested: SignalInstance  # (int) copy the branch up to this message into a new chat
    regenerate_requested: SignalInstance  # () write the last reply again
    copied: SignalInstance  # (str) something was put on the clipboard, said in words
    image_opened: SignalInstance  # (str) show this image (its sha256) full size


@dataclass(slots=True)
class TranscriptState:
    """The messages shown, and the reply streaming into them.

    Attributes:
        messages: what is shown, by id (the streaming reply as it began).
        headers: a cursor at each shown message's header, in the order shown (kept as the document changes).
        reasoning_blocks: each shown reply's reasoning block, by message id (its reasoning after its tool steps).
        step_reasoning: the reasoning blocks of the shown replies' tool steps, by "<message id>.<step>".
        tool_cards: the shown replies' tool calls, by "<message id>.<step>.<call>".
        steps_shown: how many of each shown reply's tool steps are in the document, by message id.
        stream_id: the streaming reply's id; None when none streams.
        stream_text: the streaming reply's text, in the pieces that came since the last frame.
        thought: the streaming reply's reasoning as it comes.
        streaming: a reply is shown as it streams.
        busy: a reply is being written or waits for the model: no version switching, regenerating or editing.
    """

    messages: dict[int, Message] = field(default_factory=dict)
    headers: dict[int, QTextCursor] = field(default_factory=dict)
    reasoning_blocks: dict[int, ReasoningBlock] = field(default_factory=dict)
    step_reasoning: dict[str, ReasoningBlock] = field(default_factory=dict)
    tool_cards: dict[str, ToolCard] = field(default_factory=dict)
    steps_shown: dict[int, int] = field(default_factory=dict)
    stream_id: int | None = None
    stream_text: list[str] = field(default_factory=list)
    thought: LiveReasoning = field(default_factory=LiveReasoning)
    streaming: bool = False
    busy: bool = False

    def clear(self) -> None:
        """Nothing shown, nothing streaming."""
        self.streaming = False
        self.stream_id = None
        self.messages.clear()
        self.reasoning_blocks.clear()
        self.step_reasoning.clear()
        self.tool_cards.clear()
        self.steps_shown.clear()
        self.headers.clear()

    def shown_ids(self) -> list[int]:
        """The messages shown, in order."""
        return list(self.headers)

    def can_change(self) -> bool:
        """Whether a reply may be regenerated or a message edited now (not while one is written)."""
        return not self.busy and not self.streaming

    def message_at(self, position: int) -> Message | None:
        """The message shown at a document position (the streaming reply with what it has so far)."""
        before = [mid for mid, cursor in self.headers.items() if cursor.position() <= position]
        return self.shown(before[-1]) if before else None

    def shown(self, message_id: int) -> Message | None:
        """A shown message as it reads now: the streaming reply with its text and reasoning so far."""
        message = self.messages.get(message_id)
        if message is None or message_id != self.stream_id:
            return message
        block = self.reasoning_blocks.get(message_id)
        thought = (block.text if block else "") + "".join(self.thought.pending)
        return replace(message, content="".join(self.stream_text), reasoning=thought,
                       reasoning_closed=not self.thought.thinking or not thought)

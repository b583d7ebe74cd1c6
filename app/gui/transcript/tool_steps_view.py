"""The tool steps of the transcript's replies: each step's reasoning (a collapsed block), its text (Markdown, as
the answer) and its calls (tool cards, tool_card.py), in order, before the reply's answer.

A helper the chat view owns. A finished reply's steps are inserted with the reply; a streaming reply's come
one at a time (`ChatView.on_tool_step`): the part of the reply streamed since the last step (its reasoning block
and its text) is replaced by the step as the message has it, and what streams next goes below its cards.
Cards are rewritten in place as their calls run and end; a running call's header counts its seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtGui import QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument

from app.chat.reasoning_text import reasoning_header
from app.gui.transcript.html import LEAD, TranscriptColors, number_code_links, themed
from app.gui.transcript.reasoning_block import LiveReasoning, ReasoningBlock
from app.gui.transcript.state import TranscriptState
from app.gui.transcript.tool_card import ToolCard
from app.services.history.store import Message
from app.services.history.tool_steps import ToolCallRecord, ToolStep
from app.services.markdown_render import code_blocks, render_markdown

CLOCK_MS = 500  # a running call's "Running… 3 s" moves with the seconds (checked twice a second)

STEP_REASONING_HEADER = "Thought"


def step_code_count(steps: tuple[ToolStep, ...]) -> int:
    """How many code blocks (Copy links) these steps' texts have: the answer's are numbered after them."""
    return sum(len(code_blocks(step.text)) for step in steps)


def message_code_blocks(message: Message) -> list[tuple[str, str]]:
    """(language, code) of every code block of a reply as shown: its steps' texts', then its answer's."""
    return [block for step in message.tool_steps for block in code_blocks(step.text)] + code_blocks(message.content)


class LiveThought:
    """The streaming reply's reasoning shown so far, handed to the step it belongs to."""

    __slots__ = ("text", "header", "expanded")

    def __init__(self, text: str, header: str, expanded: bool):
        self.text, self.header, self.expanded = text, header, expanded


def take_thought(state: TranscriptState) -> LiveThought:
    """The streaming reply's reasoning since its last step (it goes to the new step; its block leaves the
    reply's), and a fresh count for what it thinks next."""
    block = state.reasoning_blocks.pop(state.stream_id, None) if state.stream_id is not None else None
    thought, state.thought = state.thought, LiveReasoning()
    text = (block.text if block else "") + thought.take()
    header = reasoning_header(thought.seconds(), thought.tokens or None, streaming=False) if text.strip() else ""
    return LiveThought(text, header, block is not None and block.expanded)


class ToolSteps(QObject):
    """The steps and cards of the chat view's replies.

    Args:
        document: the view's document.
        state: what the view shows (the blocks and cards are kept there).
        colors: the transcript's colours now.
        spacer: the 1px block format between the parts.
        parent: the Qt parent (the view).
    """

    def __init__(self, document: QTextDocument, state: TranscriptState, colors: Callable[[], TranscriptColors],
                 spacer: QTextBlockFormat, parent: QObject | None = None):
        super().__init__(parent)
        self._document = document
        self._state, self._colors, self._spacer = state, colors, spacer
        self.clock = QTimer(self, interval=CLOCK_MS)
        self.clock.timeout.connect(self._tick)

    # ------------------------------------------------------------ inserting

    def insert(self, cursor: QTextCursor, message: Message, start: int = 0, live: LiveThought | None = None) -> int:
        """Insert the steps of `message` from `start` at `cursor` (at the document's end), `live` the reasoning
        shown so far for the first of them; the number the answer's first code block takes."""
        steps = message.tool_steps
        codes = step_code_count(steps[:start])
        for k in range(start, len(steps)):
            codes = self._insert_step(cursor, message.id, k, steps[k], codes, live if k == start else None)
        self._state.steps_shown[message.id] = len(steps)
        self._clock_follows()
        return codes

    def open_step(self, position: int, message: Message, live: LiveThought) -> tuple[int, int]:
        """The streaming reply called tools: what the document has from `position` (the reply since its last
        step) is replaced by its steps not yet shown, `live` the reasoning shown meanwhile. Returns the number
        the next code block takes and where what streams next starts."""
        cursor = self._cut_from(position)
        self._state.messages[message.id] = message
        codes = self.insert(cursor, message, self.shown_steps(message.id), live)
        cursor.insertBlock(self._spacer, QTextCharFormat())
        return codes, cursor.position()

    def cut(self, position: int, message_id: int) -> None:
        """Remove a reply's body from `position` to the end (it is shown anew)."""
        self._cut_from(position)
        self._state.reasoning_blocks.pop(message_id, None)
        self.forget(message_id)

    def _cut_from(self, position: int) -> QTextCursor:
        cursor = QTextCursor(self._document)
        cursor.setPosition(position)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(self._spacer)
        cursor.setCharFormat(QTextCharFormat())
        return cursor

    def _insert_step(self, cursor: QTextCursor, message_id: int, k: int, step: ToolStep, codes: int,
                     live: LiveThought | None) -> int:
        reasoning = step.reasoning or (live.text if live else "")
        if reasoning.strip():
            self._new_block(cursor)
            header = live.header if live and live.header else STEP_REASONING_HEADER
            block = ReasoningBlock(cursor, message_id, reasoning, header, key=f"{message_id}.{k}")
            self._state.step_reasoning[block.key] = block
            if live and live.expanded:
                block.toggle()
            self._after_frame(cursor, block.frame.lastPosition())
        if step.text.strip():
            html = themed(render_markdown(step.text, code_headers=True), self._colors())
            html, codes = number_code_links(html, message_id, codes)
            self._new_block(cursor)
            cursor.insertHtml(LEAD + html)
        for i, call in enumerate(step.calls):
            self._new_block(cursor)
            card = ToolCard(cursor, f"{message_id}.{k}.{i}", call)
            self._state.tool_cards[card.key] = card
            self._after_frame(cursor, card.frame.lastPosition())
        return codes

    def _new_block(self, cursor: QTextCursor) -> None:
        """A block to write the next part in: the cursor's own when it is empty, else a new one."""
        if cursor.block().length() == 1:
            cursor.setBlockFormat(self._spacer)
            cursor.setCharFormat(QTextCharFormat())
        else:
            cursor.insertBlock(self._spacer, QTextCharFormat())

    def _after_frame(self, cursor: QTextCursor, last: int) -> None:
        cursor.setPosition(last + 1)  # the line below the frame: 1px, as between blocks
        cursor.setBlockFormat(self._spacer)
        cursor.setCharFormat(QTextCharFormat())

    def shown_steps(self, message_id: int) -> int:
        """How many of a reply's steps are shown."""
        return self._state.steps_shown.get(message_id, 0)

    def forget(self, message_id: int) -> None:
        """A reply's blocks and cards are no longer in the document."""
        prefix = f"{message_id}."
        self._state.steps_shown.pop(message_id, None)
        for table in (self._state.step_reasoning, self._state.tool_cards):
            for key in [key for key in table if key.startswith(prefix)]:
                del table[key]

    # ------------------------------------------------------------ changes

    def update(self, message_id: int, step: int, call: ToolCallRecord) -> bool:
        """A call of a shown reply changed: its card is rewritten and the message shown has it; False when the
        reply or the call is not shown."""
        message = self._state.messages.get(message_id)
        if message is None or not 0 <= step < len(message.tool_steps):
            return False
        steps = message.tool_steps
        self._state.messages[message_id] = replace(
            message, tool_steps=steps[:step] + (steps[step].with_call(call),) + steps[step + 1:])
        card = next((card for key, card in self._state.tool_cards.items()
                     if key.startswith(f"{message_id}.{step}.") and card.call.id == call.id), None)
        if card is None:
            return False
        card.set_call(call)
        self._clock_follows()
        return True

    def sync(self, message: Message) -> bool:
        """Bring the cards of a reply up to its final steps; False when it has steps not shown (or fewer)."""
        if self.shown_steps(message.id) != len(message.tool_steps):
            return False
        for k, step in enumerate(message.tool_steps):
            for i, call in enumerate(step.calls):
                card = self._state.tool_cards.get(f"{message.id}.{k}.{i}")
                if card is None:
                    return False
                card.set_call(call)
        self._clock_follows()
        return True

    def toggle(self, key: str) -> bool:
        """Expand or collapse a card or a step's reasoning; whether there is one of that key."""
        item = self._state.tool_cards.get(key) or self._state.step_reasoning.get(key)
        if item is None:
            return False
        item.toggle()
        return True

    def show_all(self, key: str) -> bool:
        card = self._state.tool_cards.get(key)
        if card is not None:
            card.show_whole_result()
        return card is not None

    def header_cursor(self, key: str) -> QTextCursor | None:
        item = self._state.tool_cards.get(key) or self._state.step_reasoning.get(key)
        return item.header_cursor() if item is not None else None

    def _clock_follows(self) -> None:
        running = any(card.call.status == "running" for card in self._state.tool_cards.values())
        if running and not self.clock.isActive():
            self.clock.start()
        elif not running:
            self.clock.stop()

    @Slot()
    def _tick(self) -> None:
        for card in self._state.tool_cards.values():
            card.tick()
        self._clock_follows()

"""ChatView: the transcript, a QTextBrowser that renders messages as Markdown (HTML: html.py).

A streaming reply is coalesced: text is buffered and a timer re-renders only the tail of
the document, from a remembered position, and only the last Markdown block of the reply
(the blocks before it cannot change any more and were inserted once). The timer waits
longer when rendering took long, so a fast model never floods the event loop.

A reasoning model's thoughts sit in a collapsed block above the answer (app/gui/transcript/reasoning_block.py),
its header counting seconds and tokens while they stream; a click, Enter or Space on the header
shows them. A reply's tool steps come before its answer, each its text and its calls as collapsed cards
(tool_steps_view.py, tool_card.py), rewritten in place as the calls run and end. Over a message the mouse brings Copy, Regenerate (the last reply) and Edit (yours) to its
header (message_actions.py); its context menu has them too, with Copy with reasoning and Branch to new
chat (actions.py). A reply ends with its stats line; a code block names its language and has a
Copy link. A message with other versions has a ‹ 2/3 › bar beside its header (version_bar.py); a chat
opened from a search marks the words found.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QMimeData, Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import (
    QContextMenuEvent,
    QDesktopServices,
    QKeyEvent,
    QResizeEvent,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import QTextBrowser, QWidget

from app.chat.reasoning_text import finished_header
from app.gui.transcript.actions import TranscriptActions
from app.gui.transcript.citations import PassageViewer, link_citations
from app.gui.transcript.clips import SOUND_SCHEME, sound_icon
from app.gui.transcript.html import (
    LEAD,
    ZWSP,
    TranscriptColors,
    anchor_cursors,
    body_html,
    has_frames,
    has_reasoning,
    header_html,
    message_html,
    note_html,
    number_code_links,
    spacer_format,
    stats_html,
    themed,
)
from app.gui.transcript.images import THUMB_SCHEME, THUMB_SIDE, TranscriptImages, thumb_size
from app.gui.transcript.links import TranscriptLinks
from app.gui.transcript.marks import TranscriptMarks
from app.gui.transcript.message_actions import MessageActions
from app.gui.transcript.reasoning_block import LiveReasoning, ReasoningBlock
from app.gui.transcript.state import TranscriptState
from app.gui.transcript.tool_steps_view import ToolSteps, take_thought
from app.gui.transcript.version_bar import VersionBars
from app.services.history.store import Message, Version
from app.services.history.tool_steps import ToolCallRecord
from app.services.markdown_render import render_block, split_blocks, warm_up_in_background
from app.services.media.store import MediaStore

MIN_INTERVAL_MS = 16
MAX_INTERVAL_MS = 250


class ChatView(QTextBrowser):
    """The transcript of the open conversation.

    What it shows is its `state` (TranscriptState), which its helpers read: `transcript_actions` (copying,
    the context menu, links), `marks` (the ‹ 2/3 › bars, search marks) and `message_actions` (the hover bar).

    Args:
        parent: the Qt parent.

    Signals:
        version_requested(int): show this version of a message (a ‹ › button).
        edit_requested(int): edit this message of yours (its Edit button or context menu).
        branch_requested(int): copy the branch up to this message into a new chat.
        regenerate_requested(): write the last reply again (its Regenerate button or context menu).
        copied(str): something was put on the clipboard, said in words ("Copied the python code").
        image_opened(str): an image's thumbnail was clicked (its sha256); shown full size when `images` is set.
    """

    version_requested = Signal(int)
    edit_requested = Signal(int)
    branch_requested = Signal(int)
    regenerate_requested = Signal()
    copied = Signal(str)
    image_opened = Signal(str)
    file_missing = Signal(str)  # an attached document's original could not be opened: why, one line

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setOpenLinks(False)
        self.document().setUndoRedoEnabled(False)  # no history of every streamed frame
        warm_up_in_background()
        self._spacer = spacer_format()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.flush)
        self._clock = QTimer(self, interval=500)  # the "Thinking… 3 s" counts on while no token comes
        self._clock.timeout.connect(self._tick)
        self._interval_ms = MIN_INTERVAL_MS
        self.state = TranscriptState()
        # Where the streaming reply's body, the part of it since its last tool step, and that part's last block
        # start (kept as the document changes).
        self._reply, self._body, self._tail = (QTextCursor(self.document()) for _ in range(3))
        for cursor in (self._reply, self._body, self._tail):
            cursor.setKeepPositionOnInsert(True)
        self._stable_blocks = 0
        self._codes = 0  # the streaming reply's code blocks in its finished blocks (their Copy links' numbers)
        self._transcript_colors: TranscriptColors | None = None  # for the palette shown now (_colors)
        self.last_render_ms = 0.0
        self.renders = 0
        self.version_bars = VersionBars(self, self.state.headers.get)
        self.version_bars.requested.connect(self.version_requested)
        self.tool_steps = ToolSteps(self.document(), self.state, self._colors, self._spacer, self)
        self.links = TranscriptLinks(self, self.state, self.tool_steps, self._at_end, self._scroll_to_end)
        self.transcript_actions = TranscriptActions(self, self.state, self, self.links.toggle)
        self.anchorClicked.connect(self.transcript_actions.open_link)
        self.marks = TranscriptMarks(self, self.state, self.version_bars)
        self.message_actions = MessageActions(self, self.state, self, self.transcript_actions.copy_message)
        self.images: TranscriptImages | None = None  # the messages' images (use_media_store)
        self.media_store: MediaStore | None = None
        self.image_opened.connect(self._open_image)

    def use_media_store(self, store: MediaStore) -> None:
        """Where the messages' images are kept (the history's media store): their thumbnails come from there."""
        self.images = TranscriptImages(store, self.document(), self)
        self.media_store = store  # attached documents' originals too (open_file)

    def loadResource(self, kind: int, url: QUrl) -> object:  # noqa: N802 (Qt override)
        if url.scheme() == THUMB_SCHEME and self.images is not None:
            sha256 = url.path()
            ref = next((i for m in self.state.messages.values() for i in m.images if i.sha256 == sha256), None)
            size = thumb_size(ref.width, ref.height) if ref is not None else (THUMB_SIDE, THUMB_SIDE)
            return self.images.thumbnail(sha256, size)
        if url.scheme() == SOUND_SCHEME:  # a clip's chip
            return sound_icon(self)
        return super().loadResource(kind, url)

    def _open_image(self, sha256: str) -> None:
        if self.images is not None:
            self.images.open(sha256, self)

    @property
    def reasoning_blocks(self) -> dict[int, ReasoningBlock]:
        """Each shown reply's reasoning block, by message id."""
        return self.state.reasoning_blocks

    # ------------------------------------------------------------ whole messages

    def set_messages(self, messages: list[Message]) -> None:
        """Show these messages (replaces the transcript and ends any stream shown)."""
        self._timer.stop()
        self._clock.stop()
        self.state.clear()
        self.clear()
        self.message_actions.hide()
        self.version_bars.clear()  # the conversation's versions come next (set_versions)
        self.setExtraSelections([])
        run: list[str] = []  # messages without reasoning go in as one piece of HTML
        for message in messages:
            if has_frames(message):
                if run:
                    self._append_html("".join(run))
                    run = []
                self._append_message(message)
            else:
                self.state.messages[message.id] = message
                run.append(message_html(message, self._colors(), self._cited(message)))
        if run:
            self._append_html("".join(run))
        self.state.headers.update(anchor_cursors(self.document(), 0))
        self._scroll_to_end(True)

    def append_message(self, message: Message) -> None:
        at_end = self._at_end()
        start = self._end_cursor().position()
        self._append_message(message)
        self.state.headers.update(anchor_cursors(self.document(), start))
        self._scroll_to_end(at_end)

    def _append_message(self, message: Message) -> None:
        self.state.messages[message.id] = message
        if not has_frames(message):
            self._append_html(message_html(message, self._colors(), self._cited(message)))
            return
        self._append_html(header_html(message.role, message.id, self._colors()))
        self._append_body(message)

    def _append_body(self, message: Message) -> None:
        """A finished reply's tool steps, reasoning, answer, note and stats line, at the end."""
        codes = self.tool_steps.insert(self._end_cursor(), message) if message.tool_steps else 0
        if has_reasoning(message):
            self._add_block(self._end_cursor(), message.id, message.reasoning, finished_header(message))
        self._append_html(body_html(message, self._colors(), codes, self._cited(message)))

    def _cited(self, message: Message) -> Message | None:
        """The message a reply answers, when it was sent with documents: the reply's [n] cite its passages."""
        parent = self.state.messages.get(message.parent_id) if message.parent_id is not None else None
        return parent if parent is not None and parent.documents is not None else None

    def open_file(self, sha256: str) -> bool:
        """Open an attached document's original, kept in the media store, with the system's viewer; False (said
        in `file_missing`) when the store has it no more."""
        store = self.media_store
        try:
            path = store.path_of(sha256) if store is not None else None
        except ValueError:  # not a hash: a link typed into a message, never a path
            path = None
        if path is None:
            name = next((f.name for m in self.state.messages.values() for f in m.files if f.sha256 == sha256), "")
            self.file_missing.emit(f"{name or 'The file'} is no longer kept beside the chat history")
            return False
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))
        return True

    def open_citation(self, message_id: int, number: int) -> PassageViewer | None:
        """Open passage [number] of the documents message `message_id` was sent with (a citation's link)."""
        message = self.state.messages.get(message_id)
        if message is None or message.documents is None:
            return None
        viewer = PassageViewer(message.documents, number, self)
        viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        viewer.show()
        return viewer

    def _add_block(self, cursor: QTextCursor, message_id: int, text: str, header: str) -> ReasoningBlock:
        cursor.insertBlock(self._spacer, QTextCharFormat())
        block = self.state.reasoning_blocks[message_id] = ReasoningBlock(cursor, message_id, text, header)
        cursor.setPosition(block.frame.lastPosition() + 1)  # the line below the frame: 1px, as between blocks
        cursor.setBlockFormat(self._spacer)
        return block

    def plain_text(self) -> str:
        return self.toPlainText().replace(ZWSP, "")

    # ------------------------------------------------------------ streaming

    def begin_stream(self, message: Message) -> None:
        """Start showing a reply that will arrive with `append_reasoning` and `append_stream`."""
        self.state.messages[message.id] = message
        start = self._end_cursor().position()
        self._append_html(header_html(message.role, message.id, self._colors()))
        self.state.headers.update(anchor_cursors(self.document(), start))
        self.version_bars.set_enabled(False)
        cursor = self._end_cursor()
        cursor.insertBlock(self._spacer, QTextCharFormat())
        self._reply.setPosition(cursor.position())
        self._stable_blocks = self._codes = 0
        if message.tool_steps:  # a reply that called tools before it was shown
            self._codes = self.tool_steps.insert(cursor, message)
            cursor.insertBlock(self._spacer, QTextCharFormat())
        self._body.setPosition(cursor.position())
        self._tail.setPosition(cursor.position())
        self.state.stream_text = [message.content] if message.content else []
        self.state.stream_id = message.id
        self.state.thought = LiveReasoning(message.reasoning)
        self._interval_ms = MIN_INTERVAL_MS
        self.state.streaming = True
        self._schedule()

    def append_reasoning(self, text: str, tokens: int, seconds: float) -> None:
        """Add reasoning to the reply (`tokens` of it so far, begun `seconds` ago); shown on the next tick."""
        if not self.state.streaming:
            return
        self.state.thought.add(text, tokens, seconds)
        if self.state.thought.thinking and not self._clock.isActive():
            self._clock.start()  # the header counts on while no token comes
        self._schedule()

    def append_stream(self, text: str) -> None:
        """Add text to the reply; the view catches up on the next timer tick."""
        if not self.state.streaming:
            return
        if text:
            self.state.thought.answer_began()
        first = text and not any(self.state.stream_text)
        self.state.stream_text.append(text)
        if first:  # the reply's first words are shown now; what follows is coalesced at the timer's pace
            self._timer.start(0)
        else:
            self._schedule()

    def end_stream(self, message: Message) -> None:
        """Show the final text, state and reasoning of the reply that streamed."""
        if not self.state.streaming:
            self.append_message(message)
            return
        self._timer.stop()
        self._clock.stop()
        self.state.messages[message.id] = message
        if (message.tool_steps or self.tool_steps.shown_steps(message.id)) and not self.tool_steps.sync(message):
            self._show_again(message)  # steps came that were never shown: the reply is shown anew, whole
            return
        self.state.stream_text = [message.content]
        self.state.thought.take()  # the message has the whole reasoning
        self.flush(note=note_html(message.state, self._colors()) + stats_html(message, self._colors()))
        block = self.state.reasoning_blocks.get(message.id)
        if message.reasoning and block is None:
            block = self._add_reasoning_block()
        if block is not None:
            block.set_text(message.reasoning)
            block.set_header(self.state.thought.final_header(message))
        self._stream_ended()

    def _stream_ended(self) -> None:
        self.state.streaming = False
        self.state.stream_id = None
        self.version_bars.set_enabled(not self.state.busy)

    def _show_again(self, message: Message) -> None:
        """Replace the streaming reply's body by the finished reply's."""
        self.tool_steps.cut(self._reply.position(), message.id)
        self._append_body(message)
        self._stream_ended()

    # ------------------------------------------------------------ tool steps

    @Slot(object)
    def on_tool_step(self, message: Message) -> None:
        """The streaming reply called tools: what streamed since its last step becomes the new step (its
        reasoning, its text, then its calls' cards, as `message` has them); what streams next goes below."""
        if not self.state.streaming or message.id != self.state.stream_id:
            return
        at_end = self._at_end()
        self._timer.stop()
        self._codes, next_part = self.tool_steps.open_step(self._body.position(), message, take_thought(self.state))
        self._body.setPosition(next_part)
        self._tail.setPosition(next_part)
        self.state.stream_text = []
        self._stable_blocks = 0
        self._scroll_to_end(at_end)

    @Slot(int, int, object)
    def on_tool_call_changed(self, message_id: int, step: int, call: ToolCallRecord) -> None:
        """A call of a shown reply runs or ended: its card is rewritten in place (expanded or not)."""
        at_end = self._at_end()
        if self.tool_steps.update(message_id, step, call):
            self._scroll_to_end(at_end and message_id == self.state.stream_id)

    @property
    def streaming(self) -> bool:
        return self.state.streaming

    def _schedule(self) -> None:
        if not self._timer.isActive():
            self._timer.start(self._interval_ms)

    @Slot()
    def _tick(self) -> None:
        block = self.state.reasoning_blocks.get(self.state.stream_id) if self.state.streaming else None
        if block is None or not self.state.thought.thinking:
            self._clock.stop()
            return
        block.set_header(self.state.thought.header())

    def _add_reasoning_block(self) -> ReasoningBlock:
        """The streaming reply's reasoning block, at the start of its body (above any answer)."""
        cursor = QTextCursor(self.document())
        cursor.setPosition(self._body.position())
        block = self._add_block(cursor, self.state.stream_id, "", self.state.thought.header())
        if not self._stable_blocks:  # the answer's last block now starts below it
            self._tail.setPosition(block.frame.lastPosition() + 1)
        return block

    def _flush_reasoning(self) -> None:
        """Bring the streaming reply's reasoning block up to date (made with its first reasoning)."""
        block = self.state.reasoning_blocks.get(self.state.stream_id)
        text = self.state.thought.take()
        if block is None:
            if not text:
                return
            block = self._add_reasoning_block()
        block.append(text)
        block.set_header(self.state.thought.header())

    @Slot()
    def flush(self, note: str = "") -> None:
        """Re-render the tail: new finished blocks once, then the last (growing) block."""
        if not self.state.streaming:
            return
        started = time.perf_counter()
        at_end = self._at_end()
        self._flush_reasoning()
        text = "".join(self.state.stream_text)
        self.state.stream_text = [text]
        blocks = split_blocks(text)
        cursor = QTextCursor(self.document())
        cursor.setPosition(self._tail.position())
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(self._spacer)
        cursor.setCharFormat(QTextCharFormat())
        stable = len(blocks) - 1
        if stable > self._stable_blocks:
            html = themed("".join(render_block(b, True) for b in blocks[self._stable_blocks : stable]), self._colors())
            html, self._codes = number_code_links(html, self.state.stream_id, self._codes)
            cursor.insertHtml(LEAD + self._stream_citations(html))
            cursor.insertBlock(self._spacer, QTextCharFormat())
            self._tail.setPosition(cursor.position())
            self._stable_blocks = stable
        tail = (number_code_links(themed(render_block(blocks[-1], True), self._colors()), self.state.stream_id, self._codes)[0]
                if blocks else "")
        if tail or note:
            cursor.insertHtml(LEAD + self._stream_citations(tail) + note)
        self._scroll_to_end(at_end)
        self.last_render_ms = (time.perf_counter() - started) * 1000
        self.renders += 1
        # Adaptive: give the event loop at least twice the time the render took.
        self._interval_ms = int(min(MAX_INTERVAL_MS, max(MIN_INTERVAL_MS, 2 * self.last_render_ms)))

    def _stream_citations(self, html: str) -> str:
        """The streaming reply's [n] linked to the passages of the message it answers (if sent with documents)."""
        reply = self.state.messages.get(self.state.stream_id)
        cited = self._cited(reply) if reply is not None else None
        return link_citations(html, cited.id, cited.documents) if cited is not None else html

    # ------------------------------------------------------------ reasoning blocks

    def toggle_reasoning(self, message_id: int) -> bool:
        """Show or hide a reply's reasoning; whether it has a block."""
        return self.links.toggle_reasoning(message_id)

    def toggle_link(self, href: str) -> bool:
        """Open or close what a link of the transcript's own names (a reasoning header, a tool card, "Show all")."""
        return self.links.toggle(href)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        """Enter or Space on a focused reasoning header, tool card or "Show all" (Tab moves between links)."""
        if not self.links.key_pressed(event):
            super().keyPressEvent(event)

    # ------------------------------------------------------------ versions, search hits, busy (marks.py)

    def set_versions(self, versions: dict[int, Version]) -> None:
        """Each message's place among its versions (the open chat's, by id): a ‹ 2/3 › bar where there are more."""
        self.marks.set_versions(versions)

    def show_hit(self, message_id: int, query: str) -> bool:
        """Scroll to a message and mark `query` in it (the chat was opened from a search); False when the
        message is not shown."""
        return self.marks.show_hit(message_id, query)

    def set_busy(self, busy: bool) -> None:
        """A reply is being written or waits for the model: the versions cannot be switched, nor a reply
        regenerated or a message edited, meanwhile."""
        self.state.busy = busy
        self.version_bars.set_enabled(not busy and not self.state.streaming)
        self.message_actions.schedule()  # its Regenerate and Edit follow

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:  # noqa: N802 (Qt override)
        self.transcript_actions.context_menu(event)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        """A new theme: the transcript's colours are in its HTML, so it is rendered again (a streaming reply
        takes them at its next frame; what is above it at the next opening)."""
        super().changeEvent(event)
        if event.type() != QEvent.Type.PaletteChange:
            return
        self._transcript_colors = None
        if not self.state.streaming and self.state.messages:
            versions = {mid: bar.version for mid, bar in self.version_bars.bars.items()}
            self.set_messages(list(self.state.messages.values()))
            self.set_versions(versions)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        # A view read at its end stays there when it shrinks (a permission bar opened under it).
        at_end = self._at_end()
        super().resizeEvent(event)
        self._scroll_to_end(at_end)
        self.version_bars.schedule()  # the bars keep to the right edge

    # ------------------------------------------------------------ helpers

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _append_html(self, html: str) -> None:
        cursor = self._end_cursor()
        if not self.document().isEmpty():
            cursor.insertBlock(self._spacer, QTextCharFormat())
        else:
            cursor.setBlockFormat(self._spacer)
        cursor.insertHtml(LEAD + html)

    def _colors(self) -> TranscriptColors:
        """The transcript's colours for the palette shown now (kept until the palette changes)."""
        if self._transcript_colors is None:
            self._transcript_colors = TranscriptColors.of(self.palette())
        return self._transcript_colors

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 8

    def _scroll_to_end(self, wanted: bool) -> None:
        if wanted:
            bar = self.verticalScrollBar()
            bar.setValue(bar.maximum())

    def createMimeDataFromSelection(self) -> QMimeData:  # noqa: N802 (Qt override)
        data = super().createMimeDataFromSelection()
        if data.hasText():
            data.setText(data.text().replace(ZWSP, ""))
        return data

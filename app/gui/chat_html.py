"""The HTML of the transcript's messages (app/gui/chat_view.py inserts it), and where it put each one.

Each message's header is a named anchor (`tailor-message-<id>`): the view finds the message under the
mouse by it, and `anchor_cursors` turns the anchors of a stretch of the document into cursors that keep
their place while the document grows below them (the ‹ 2/3 › bars and a search hit are placed by them).
"""

from __future__ import annotations

from html import escape

from PySide6.QtGui import QTextBlockFormat, QTextCursor, QTextDocument

from app.services.markdown_render import render_markdown
from app.services.store import Message

ZWSP = "\u200b"
# Qt merges the first block of inserted HTML into the block at the cursor (losing its
# format), so every insertion starts with a throw-away paragraph that lands in a 1px spacer.
LEAD = f"<p>{ZWSP}</p>"
MESSAGE_ANCHOR = "tailor-message-"
_ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
_ROLE_COLORS = {"user": "#1a5fb4", "assistant": "#26a269", "system": "#777777"}
_STATE_NOTES = {"interrupted": "reply interrupted", "cancelled": "stopped", "streaming": "writing…"}


def spacer_format() -> QTextBlockFormat:
    fmt = QTextBlockFormat()
    fmt.setLineHeight(1, QTextBlockFormat.LineHeightTypes.FixedHeight.value)
    fmt.setTopMargin(0)
    fmt.setBottomMargin(0)
    return fmt


def header_html(role: str, message_id: int | None = None) -> str:
    color = _ROLE_COLORS.get(role, "#000000")
    name = f'<span style="color:{color};">{_ROLE_NAMES.get(role, role)}</span>'
    if message_id is not None:
        name = f'<a name="{MESSAGE_ANCHOR}{message_id}">{name}</a>'
    return f'<p style="margin-top:10px;"><b>{name}</b></p>'


def note_html(state: str) -> str:
    note = _STATE_NOTES.get(state)
    return f'<p><i><span style="color:#999999;">({escape(note)})</span></i></p>' if note else ""


def body_html(message: Message) -> str:
    """A finished message's Markdown body and state note (below its reasoning, if any)."""
    return render_markdown(message.content) + note_html(message.state)


def message_html(message: Message) -> str:
    """The whole HTML of one finished message without reasoning: header, Markdown body and a state note."""
    return header_html(message.role, message.id) + body_html(message)


def has_reasoning(message: Message) -> bool:
    return message.role == "assistant" and bool(message.reasoning)


def anchor_cursors(document: QTextDocument, start: int) -> dict[int, QTextCursor]:
    """The message headers from the block at `start` to the end: a cursor at each, by message id."""
    found: dict[int, QTextCursor] = {}
    block = document.findBlock(start)
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            for name in fragment.charFormat().anchorNames():
                if name.startswith(MESSAGE_ANCHOR) and name[len(MESSAGE_ANCHOR):].isdigit():
                    cursor = QTextCursor(document)
                    cursor.setPosition(fragment.position())
                    found[int(name[len(MESSAGE_ANCHOR):])] = cursor
            it += 1
        block = block.next()
    return found

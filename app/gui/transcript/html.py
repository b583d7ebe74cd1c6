"""The HTML of the transcript's messages (app/gui/transcript/view.py inserts it), and where it put each one.

Each message's header is a named anchor (`tailor-message-<id>`): the view finds the message under the
mouse by it, and `anchor_cursors` turns the anchors of a stretch of the document into cursors that keep
their place while the document grows below them (the ‹ 2/3 › bars and a search hit are placed by them).
A reply ends with its stats line in small type; each code block's Copy link is numbered within its message
(`tailor-code:<message id>.<n>`), which the view resolves to the n-th block of the message's source.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from PySide6.QtGui import QColor, QPalette, QTextBlockFormat, QTextCursor, QTextDocument

from app.chat.stats_line import cache_text
from app.gui.common.theme import mix, status_colors
from app.gui.transcript.citations import documents_html, link_citations
from app.gui.transcript.clips import clips_html
from app.gui.transcript.images import images_html
from app.services.history.store import Message
from app.services.markdown_render import CODE_BACKGROUND, CODE_COPY_HREF, render_markdown

ZWSP = "\u200b"
# Qt merges the first block of inserted HTML into the block at the cursor (losing its
# format), so every insertion starts with a throw-away paragraph that lands in a 1px spacer.
LEAD = f"<p>{ZWSP}</p>"
MESSAGE_ANCHOR = "tailor-message-"
CODE_SCHEME = "tailor-code"
_CODE_LINK = f'href="{CODE_COPY_HREF}"'
_ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
_STATE_NOTES = {"interrupted": "reply interrupted", "cancelled": "stopped", "streaming": "writing…"}


def spacer_format() -> QTextBlockFormat:
    fmt = QTextBlockFormat()
    fmt.setLineHeight(1, QTextBlockFormat.LineHeightTypes.FixedHeight.value)
    fmt.setTopMargin(0)
    fmt.setBottomMargin(0)
    return fmt


@dataclass(slots=True, frozen=True)
class TranscriptColors:
    """The transcript's colours as its HTML takes them (names like "#1a5fb4"), from the view's palette: the
    HTML's colours are fixed when inserted, so the view renders again when the palette changes."""

    user: str
    assistant: str
    muted: str  # secondary text: the system prompt's name, state notes, the stats line
    code_background: str

    @classmethod
    def of(cls, palette: QPalette) -> TranscriptColors:
        base = palette.color(QPalette.ColorRole.Base)
        over = palette.color(QPalette.ColorRole.PlaceholderText)  # translucent text: shown as it lies on the base
        muted = mix(base, QColor.fromRgbF(*over.getRgbF()[:3]), over.alphaF())
        return cls(palette.color(QPalette.ColorRole.Link).name(), status_colors(palette).ok.name(), muted.name(),
                   mix(base, palette.color(QPalette.ColorRole.Text), 0.05).name())

    def role(self, role: str) -> str:
        return {"user": self.user, "assistant": self.assistant}.get(role, self.muted)


def header_html(role: str, message_id: int | None, colors: TranscriptColors) -> str:
    name = f'<span style="color:{colors.role(role)};">{_ROLE_NAMES.get(role, role)}</span>'
    if message_id is not None:
        name = f'<a name="{MESSAGE_ANCHOR}{message_id}">{name}</a>'
    return f'<p style="margin-top:10px;"><b>{name}</b></p>'


def note_html(state: str, colors: TranscriptColors) -> str:
    note = _STATE_NOTES.get(state)
    return f'<p><i><span style="color:{colors.muted};">({escape(note)})</span></i></p>' if note else ""


def stats_text(stats: dict | None) -> str:
    """A reply's figures, short: "20.5 tok/s · TTFT 0.12 s · 21 of 41 prompt tokens from cache" ("" without)."""
    if not stats:
        return ""
    parts = []
    if isinstance(stats.get("decode_tok_s"), int | float):
        parts.append(f"{stats['decode_tok_s']:.1f} tok/s")
    if isinstance(stats.get("ttft_s"), int | float):
        parts.append(f"TTFT {stats['ttft_s']:.2f} s")
    if "prompt_tokens" in stats:
        parts.append(cache_text(stats.get("cached_tokens"), stats["prompt_tokens"]))
    return " · ".join(parts)


def stats_html(message: Message, colors: TranscriptColors) -> str:
    """A reply's stats line in small type, in the theme's colour for secondary text."""
    text = stats_text(message.stats) if message.role == "assistant" else ""
    if not text:
        return ""
    return f'<p style="margin-top:2px;"><small><span style="color:{colors.muted};">{escape(text)}</span></small></p>'


def number_code_links(html: str, message_id: int, start: int = 0) -> tuple[str, int]:
    """`html` with its code blocks' Copy links numbered from `start` for this message; the next number."""
    parts = html.split(_CODE_LINK)
    numbered = [parts[0]]
    for n, part in enumerate(parts[1:], start):
        numbered.append(f'href="{CODE_SCHEME}:{message_id}.{n}"')
        numbered.append(part)
    return "".join(numbered), start + len(parts) - 1


def body_html(message: Message, colors: TranscriptColors, code_start: int = 0, cited: Message | None = None) -> str:
    """A finished message's Markdown body, state note and stats line (below its reasoning and tool steps, if
    any: its code blocks' Copy links are numbered from `code_start`, after the steps'); a user message's
    documents under it; a reply's [n] linked to the passages of `cited` (the message it answers)."""
    body, _ = number_code_links(themed(render_markdown(message.content, code_headers=True), colors), message.id,
                                code_start)
    if cited is not None and cited.documents is not None and message.role == "assistant":
        body = link_citations(body, cited.id, cited.documents)
    media = images_html(message.images) + clips_html(message.clips, colors.code_background)
    documents = documents_html(message.id, message.documents, colors.muted, message.files)
    return media + body + documents + note_html(message.state, colors) + stats_html(message, colors)


def message_html(message: Message, colors: TranscriptColors, cited: Message | None = None) -> str:
    """The whole HTML of one finished message without reasoning: header, body, state note and stats line."""
    return header_html(message.role, message.id, colors) + body_html(message, colors, cited=cited)


def themed(html: str, colors: TranscriptColors) -> str:
    """Rendered Markdown with its code blocks on the theme's background (the renderer, without Qt, writes
    a light one: the HTML export keeps it)."""
    return html.replace(f"background-color:{CODE_BACKGROUND}", f"background-color:{colors.code_background}")


def has_reasoning(message: Message) -> bool:
    return message.role == "assistant" and bool(message.reasoning)


def has_frames(message: Message) -> bool:
    """Whether a message shows more than HTML: a reasoning block, or tool steps with their cards."""
    return has_reasoning(message) or bool(message.tool_steps)


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

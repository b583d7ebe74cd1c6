"""The transcript view: Markdown, highlighted code and coalesced streaming (no engine needed)."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt

from app.gui.common.theme import palette_for
from app.gui.transcript.html import TranscriptColors
from app.gui.transcript.view import MIN_INTERVAL_MS, ChatView
from app.services.history.store import Message

CODE_REPLY = "Here is code:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nAnd **done**."


def _message(role: str, content: str, state: str = "complete", mid: int = 1) -> Message:
    return Message(mid, 1, role, content, state, None, time.time())


def _backgrounds(view: ChatView) -> set[str]:
    colors = set()
    block = view.document().begin()
    while block.isValid():
        if block.blockFormat().hasProperty(block.blockFormat().Property.BackgroundBrush):
            colors.add(block.blockFormat().background().color().name())
        block = block.next()
    return colors


def test_messages_render_as_markdown_with_highlighted_code(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.set_messages([_message("user", "Show me <b>code</b>"), _message("assistant", CODE_REPLY, mid=2)])
    text = view.plain_text()
    assert "You" in text and "Assistant" in text
    assert "Show me <b>code</b>" in text  # the user's HTML is shown as text, not markup
    assert "def add(a, b):" in text and "```" not in text
    assert TranscriptColors.of(view.palette()).code_background in _backgrounds(view)  # the code block's background
    html = view.toHtml()
    assert (
        "color:#008000" in html.replace(" ", "").lower() or "#008000" in html.lower()
    )  # pygments keyword colour


def test_streaming_is_coalesced_and_keeps_finished_blocks(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.set_messages([_message("user", "hi")])
    view.begin_stream(_message("assistant", "", "streaming", mid=2))
    for ch in CODE_REPLY:
        view.append_stream(ch)  # one call per character: far more than one render each
    assert view.renders == 0  # nothing rendered synchronously
    qtbot.waitUntil(lambda: view.renders >= 1, timeout=2000)
    assert view.renders <= 3
    assert "And done." in view.plain_text() and "def add(a, b):" in view.plain_text()
    assert view._stable_blocks == 2  # the intro and the code block were inserted once
    view.append_stream("\n\nMore text")
    qtbot.waitUntil(lambda: "More text" in view.plain_text(), timeout=2000)
    view.end_stream(_message("assistant", CODE_REPLY + "\n\nMore text", "cancelled", mid=2))
    text = view.plain_text()
    assert text.count("def add(a, b):") == 1 and text.count("More text") == 1
    assert "(stopped)" in text and not view.streaming
    assert text.index("hi") < text.index("Here is code")


def test_adaptive_interval_backs_off_after_a_slow_render(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.begin_stream(_message("assistant", "", "streaming"))
    view.append_stream("x")
    qtbot.waitUntil(lambda: view.renders >= 1, timeout=2000)
    assert view._interval_ms >= MIN_INTERVAL_MS
    view.last_render_ms = 0
    big = "".join(f"{i}. a line of text with `code` and *emphasis*\n" for i in range(3000))
    view.append_stream(big)
    qtbot.waitUntil(lambda: view.renders >= 2, timeout=5000)
    assert view._interval_ms == min(250, max(MIN_INTERVAL_MS, int(2 * view.last_render_ms)))


def test_a_new_theme_renders_the_transcript_in_its_colours(qtbot):
    """The transcript's colours are written into its HTML: a palette change renders it again, versions kept."""
    view = ChatView()
    qtbot.addWidget(view)
    view.setPalette(palette_for(Qt.ColorScheme.Light))
    view.set_messages([_message("user", "Hi"), _message("assistant", CODE_REPLY, mid=2)])
    light = TranscriptColors.of(view.palette())
    assert light.code_background in _backgrounds(view)
    view.setPalette(palette_for(Qt.ColorScheme.Dark))
    dark = TranscriptColors.of(view.palette())
    assert dark.code_background != light.code_background and dark.user != light.user
    assert dark.code_background in _backgrounds(view) and light.code_background not in _backgrounds(view)
    assert "def add(a, b):" in view.plain_text() and "Hi" in view.plain_text()
    html = view.toHtml().lower()
    assert dark.user in html and light.user not in html


def test_a_view_read_at_its_end_stays_there_when_it_shrinks(qtbot):
    # (the permission bar opens under the transcript while a reply waits on a call at its end)
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 500)
    view.show()
    view.set_messages([_message("user" if i % 2 else "assistant", f"Line {i}. " * 40, mid=i) for i in range(30)])
    bar = view.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()
    view.resize(600, 300)
    assert bar.value() == bar.maximum()
    bar.setValue(bar.maximum() // 2)  # read higher up: a resize leaves it where it was read
    view.resize(600, 250)
    assert bar.value() < bar.maximum() - 100

"""A code block in the transcript names its language and has a Copy link that puts exactly its code on the
clipboard: for each of several blocks of a reply, while the reply streams (a block still open), and from the
keyboard (real widgets, offscreen; real clicks; no engine)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication, QTextCursor

from app.gui.transcript.view import ChatView
from app.services.history.store import Message
from app.services.markdown_render import code_blocks, render_markdown

WAIT_MS = 3000
FIRST = 'def add(a, b):\n    """<b>sum</b> & more"""\n\n\treturn a + b  '  # markup, a blank line, a tab, spaces
SECOND = "echo 'hi' > out.txt\ncat out.txt"
REPLY = f"Two blocks:\n\n```python\n{FIRST}\n```\n\nand\n\n```\n{SECOND}\n```\n\nDone."


def reply(content: str, state: str = "complete", mid: int = 2) -> Message:
    return Message(mid, 1, "assistant", content, state, None, time.time())


@pytest.fixture
def view(qtbot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def copy_links(view: ChatView) -> list[tuple[str, QPoint]]:
    """Each code block's Copy link: its href and a point inside it (viewport coordinates)."""
    links = []
    block = view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            href = fragment.charFormat().anchorHref()
            if href.startswith("tailor-code:"):
                cursor = QTextCursor(view.document())
                cursor.setPosition(fragment.position() + 1)
                links.append((href, view.cursorRect(cursor).center()))
            it += 1
        block = block.next()
    return links


def click_copy(qtbot, view: ChatView, index: int) -> str:
    QGuiApplication.clipboard().setText("(nothing)")
    with qtbot.waitSignal(view.anchorClicked, timeout=WAIT_MS):
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=copy_links(view)[index][1])
    return QGuiApplication.clipboard().text()


def test_each_block_names_its_language_and_copies_exactly_its_code(qtbot, view):
    view.set_messages([Message(1, 1, "user", "Code please", "complete", None, 0.0), reply(REPLY)])
    text = view.plain_text()
    assert text.index("python") < text.index("def add") < text.index("text") < text.index("echo 'hi'")
    assert "```" not in text
    assert [href for href, _ in copy_links(view)] == ["tailor-code:2.0", "tailor-code:2.1"]
    copied = []
    view.copied.connect(copied.append)
    assert click_copy(qtbot, view, 1) == SECOND
    assert click_copy(qtbot, view, 0) == FIRST  # the source, not the highlighted HTML
    assert copied == ["Copied the code", "Copied the python code"]


def test_copy_works_while_the_reply_streams_with_a_block_still_open(qtbot, view):
    view.set_messages([reply("Earlier:\n\n```js\nlet x = 1;\n```", mid=1)])
    view.begin_stream(reply("", "streaming", mid=3))
    view.append_stream("Intro\n\n```python\nprint(1)\n```\n\nThen\n\n```bash\necho hi")  # the second still open
    qtbot.waitUntil(lambda: "echo hi" in view.plain_text(), timeout=WAIT_MS)
    assert [href for href, _ in copy_links(view)] == ["tailor-code:1.0", "tailor-code:3.0", "tailor-code:3.1"]
    assert click_copy(qtbot, view, 2) == "echo hi"
    assert click_copy(qtbot, view, 1) == "print(1)"
    assert click_copy(qtbot, view, 0) == "let x = 1;"  # an earlier reply's, while this one streams
    view.append_stream("\necho bye")
    qtbot.waitUntil(lambda: "echo bye" in view.plain_text(), timeout=WAIT_MS)
    assert click_copy(qtbot, view, 2) == "echo hi\necho bye"
    final = "Intro\n\n```python\nprint(1)\n```\n\nThen\n\n```bash\necho hi\necho bye\n```\n\nEnd."
    view.end_stream(reply(final, mid=3))
    assert [href for href, _ in copy_links(view)][1:] == ["tailor-code:3.0", "tailor-code:3.1"]
    assert click_copy(qtbot, view, 2) == "echo hi\necho bye" and click_copy(qtbot, view, 1) == "print(1)"


def test_the_keyboard_reaches_a_blocks_copy_with_tab_and_enter(qtbot, view):
    view.set_messages([reply(REPLY)])
    view.setFocus()
    QGuiApplication.clipboard().setText("(nothing)")
    qtbot.keyClick(view, Qt.Key.Key_Tab)  # the first link: the first block's Copy
    qtbot.keyClick(view, Qt.Key.Key_Tab)
    assert view.textCursor().charFormat().anchorHref() == "tailor-code:2.1"
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert QGuiApplication.clipboard().text() == SECOND


def test_only_the_chat_view_gets_code_headers():
    # The HTML export renders the same Markdown: no Copy link there, and the blocks are found in order.
    assert "tailor-code" not in render_markdown(REPLY) and "Copy" not in render_markdown(REPLY)
    assert render_markdown(REPLY, code_headers=True).count("Copy</a>") == 2
    assert code_blocks(REPLY) == [("python", FIRST), ("", SECOND)]

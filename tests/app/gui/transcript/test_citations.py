"""A message's documents in the transcript: notes and sources under it, a reply's [n] linked to the passage,
which opens highlighted in the block as the model read it."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QUrl

from app.chat.document_context import document_context
from app.gui.transcript.citations import PassageViewer, link_citations
from app.gui.transcript.view import ChatView
from app.services.documents.document import Block, Document
from app.services.history.store import Message

SECRET = "The spare key is under the blue lantern 🏮 by the door."


def document(name: str, paragraphs: list[str]) -> Document:
    text, blocks, at = "", [], 0
    for paragraph in paragraphs:
        if text:
            text += "\n\n"
            at += 2
        blocks.append(Block(at, at + len(paragraph)))
        text += paragraph
        at += len(paragraph)
    return Document(name, "text", text, tuple(blocks))


@pytest.fixture
def sent():
    # Two documents too long for the budget together: passages are retrieved, the one with the key first.
    notes = document("notes.txt", ["Shopping list: bread, 🍞 milk, eggs. " * 30, SECRET, "Weather: rain. " * 40])
    other = document("other.md", ["Nothing about keys at all. " * 40])
    return document_context([notes, other], "Where is the spare key?", 300, chunk_budget=40).sent()


@pytest.fixture
def view(qtbot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def chat(sent) -> list[Message]:
    user = Message(1, 1, "user", "Where is the spare key?", "complete", None, time.time(), documents=sent)
    answer = Message(2, 1, "assistant", "Under the lantern [1]. Not [99]; and `items[1]` is code.", "complete", None,
                     time.time(), parent_id=1)
    return [user, answer]


def hrefs(view: ChatView) -> list[str]:
    found, block = [], view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor() and fmt.anchorHref().startswith("tailor-cite:"):
                found.append((fmt.anchorHref(), it.fragment().text()))
            it += 1
        block = block.next()
    return found


def test_the_first_source_is_the_passage_that_answers(sent):
    first = sent.sources[0]
    assert SECRET in sent.block[first.start:first.end]
    assert first.label.startswith("[1] notes.txt · passage · characters ")


def test_sources_show_under_the_message_and_a_replys_citation_is_a_link(view, sent):
    view.set_messages(chat(sent))
    text = view.plain_text()
    assert all(note in text for note in sent.notes) and sent.sources[0].label in text
    links = hrefs(view)
    # Under the message, one link per source; in the reply, [1] alone: [99] names no source, items[1] is code.
    assert [h for h, t in links if t == "[1]"] == ["tailor-cite:1.1"]
    assert {h for h, t in links if t != "[1]"} == {f"tailor-cite:1.{s.number}" for s in sent.sources}


def test_a_citation_opens_its_passage_highlighted(view, sent, qtbot):
    view.set_messages(chat(sent))
    view.transcript_actions.open_link(QUrl("tailor-cite:1.1"))
    (viewer,) = view.findChildren(PassageViewer)
    qtbot.waitExposed(viewer)
    first, last = sent.sources[0], sent.sources[-1]
    assert viewer.highlighted_text() == sent.block[first.start:first.end]
    assert viewer.heading.text() == first.label
    viewer.close()
    assert "🏮" in sent.block[:last.start]  # Qt counts it as two: the highlight must still fall on the passage
    view.transcript_actions.open_link(QUrl(f"tailor-cite:1.{last.number}"))
    qtbot.waitUntil(lambda: len([v for v in view.findChildren(PassageViewer) if v.isVisible()]) == 1, timeout=3000)
    (viewer,) = [v for v in view.findChildren(PassageViewer) if v.isVisible()]
    assert viewer.highlighted_text() == sent.block[last.start:last.end]


def test_a_streamed_replys_citations_are_links_as_it_streams(view, sent, qtbot):
    user, answer = chat(sent)
    view.set_messages([user])
    view.begin_stream(Message(2, 1, "assistant", "", "streaming", None, time.time(), parent_id=1))
    view.append_stream("The key is under the lantern [1].\n\nMore")
    qtbot.waitUntil(lambda: ("tailor-cite:1.1", "[1]") in hrefs(view), timeout=3000)


def test_citations_in_code_links_and_unknown_numbers_stay_text(sent):
    html = '<p>See [1] and [2]</p><pre>x[1]</pre><a href="y">[1]</a><code>[1]</code> [99]'
    linked = link_citations(html, 5, sent)
    assert linked.count("tailor-cite:5.1") == 1 and "<pre>x[1]</pre>" in linked and "[99]" in linked
    assert ("tailor-cite:5.2" in linked) == (sent.passage(2) is not None)


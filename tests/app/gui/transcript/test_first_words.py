"""A reply's first words are shown at once; what follows is coalesced at the render timer's pace (a window
that waited a whole interval for the first token added 16 ms to every reply's time to first token)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtWidgets import QApplication

from app.gui.transcript.view import ChatView
from app.services.history.store import Message


@pytest.fixture
def view(qtbot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    qtbot.waitExposed(view)
    return view


def test_a_replys_first_words_are_shown_at_the_next_turn_of_the_event_loop(view):
    view.set_messages([Message(1, 1, "user", "Hi", "complete", None, time.time())])
    view.begin_stream(Message(2, 1, "assistant", "", "streaming", None, time.time(), parent_id=1))
    QApplication.processEvents()  # the empty start is rendered; nothing of the reply yet
    view.append_stream("Hello there")
    QApplication.processEvents()  # not the coalescing interval (16 ms or more): the first words go at once
    assert "Hello there" in view.plain_text()

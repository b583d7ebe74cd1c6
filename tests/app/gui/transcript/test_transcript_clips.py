"""A message's audio clips in the transcript: a chip each (the style's sound icon, the clip's name and length),
after its images and before its text; no file is opened to show them."""

from __future__ import annotations

import time

from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument

from app.gui.transcript.clips import SOUND_SCHEME, clip_text
from app.gui.transcript.view import ChatView
from app.services.history.store import AudioRef, ImageRef, Message


def test_a_message_shows_its_clips_as_named_chips_with_their_length(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    question = AudioRef("a" * 64, "WAV", "question.wav", 12.4)
    long = AudioRef("b" * 64, "WAV", "<lecture>.wav", 599.6)
    photo = ImageRef("c" * 64, "PNG", "photo.png", 320, 200)
    view.set_messages([Message(1, 1, "user", "What is said here?", "complete", None, time.time(), images=(photo,),
                               clips=(question, long)),
                       Message(2, 1, "assistant", "A question.", "complete", None, time.time())])
    text = view.plain_text()
    assert "question.wav · 0:12" in text and "<lecture>.wav · 10:00" in text  # escaped, shown as written
    assert text.index("question.wav") < text.index("What is said here?")
    assert clip_text(question) == "question.wav · 0:12"
    html = view.toHtml()
    assert html.count(f"{SOUND_SCHEME}:icon") == 2
    icon = view.document().resource(QTextDocument.ResourceType.ImageResource, QUrl(f"{SOUND_SCHEME}:icon"))
    assert icon is not None and not icon.isNull() and icon.width() == 16

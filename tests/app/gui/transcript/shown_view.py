"""A ChatView shown on screen at a given size, for the transcript tests that click, hover or find points in it."""

from __future__ import annotations

from app.gui.transcript.view import ChatView


def shown_view(qtbot, height: int, width: int = 700) -> ChatView:  # noqa: ANN001 - pytest-qt's qtbot
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    qtbot.waitExposed(view)
    return view

"""What a message's context menu in the chat view offers besides the standard copy and select.

The hover buttons (message_actions.py) take no focus: this menu is where the keyboard reaches the same
actions (the Menu key or Shift+F10 opens it for the message at the text cursor).
"""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMenu

from app.gui.common.tool_text import copy_with_steps
from app.gui.transcript.state import TranscriptRequests
from app.services.history.store import Message


def add_message_actions(menu: QMenu, message: Message, view: TranscriptRequests, *, last: bool,
                        can_change: bool, can_branch: bool) -> None:
    """Copy a message (a reply's answer, or with its reasoning), regenerate the last reply (`last`), edit one
    of your messages (both only when `can_change`: not while a reply is being written), copy the branch up
    to the message into a new chat (`can_branch`); `view` is asked for those (its signals)."""
    menu.addSeparator()
    # `message` is what is shown now (a streaming reply with what it has so far): copied as it is.
    menu.addAction("Copy message", lambda: QGuiApplication.clipboard().setText(copy_with_steps(message)))
    if message.role == "assistant":
        if message.reasoning or any(step.reasoning for step in message.tool_steps):
            menu.addAction("Copy with reasoning",
                           lambda: QGuiApplication.clipboard().setText(copy_with_steps(message, with_reasoning=True)))
        if last:
            regenerate = menu.addAction("Regenerate reply", view.regenerate_requested.emit)
            regenerate.setEnabled(can_change)
    elif message.role == "user":
        edit = menu.addAction("Edit message", lambda: view.edit_requested.emit(message.id))
        edit.setEnabled(can_change)
    branch = menu.addAction("Branch to new chat", lambda: view.branch_requested.emit(message.id))
    branch.setEnabled(can_branch)

"""What a message's context menu in the chat view offers besides the standard copy and select."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMenu

from app.chat.reasoning_text import copy_text
from app.services.store import Message

if TYPE_CHECKING:
    from app.gui.chat_view import ChatView


def add_message_actions(menu: QMenu, message: Message, view: ChatView, can_edit: bool, can_branch: bool) -> None:
    """Copy a reply (its answer, or with its reasoning), edit one of your messages (`can_edit`: not while a
    reply is being written), copy the branch up to the message into a new chat (`can_branch`)."""
    menu.addSeparator()
    if message.role == "assistant":
        menu.addAction("Copy message", lambda: QGuiApplication.clipboard().setText(copy_text(message)))
        if message.reasoning:
            menu.addAction("Copy with reasoning",
                           lambda: QGuiApplication.clipboard().setText(copy_text(message, with_reasoning=True)))
    elif message.role == "user":
        edit = menu.addAction("Edit message", lambda: view.edit_requested.emit(message.id))
        edit.setEnabled(can_edit)
    branch = menu.addAction("Branch to new chat", lambda: view.branch_requested.emit(message.id))
    branch.setEnabled(can_branch)

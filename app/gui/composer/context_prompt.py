"""The question the window asks when a conversation would outgrow its context, before anything is sent.

    Reload with 28,672 tokens   — the largest context that fits; the message is sent after the reload
    New chat                    — the message stays in the box, to send there
    Cancel                      — nothing changes

When even the largest context that fits is too small, only New chat (and Cancel) are offered.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QAbstractButton, QMessageBox, QWidget

from app.chat.context_guard import ContextShortfall
from app.chat.session import ChatSession
from app.gui.composer.attachments import Attachments
from app.gui.composer.message_box import Composer


def outgrown_text(short: ContextShortfall) -> tuple[str, str]:
    """The dialog's text and its informative line."""
    text = (f"This chat, with your message and room for the reply, needs about {short.needed:,} tokens; "
            f"the model's context holds {short.n_ctx:,}. Sent now, the reply would fail or stop short.")
    if short.can_reload:
        more = f"The largest context that fits this model here is {short.max_context:,} tokens."
    elif short.max_context is not None and short.max_context > short.n_ctx:
        more = (f"Even the largest context that fits this model here ({short.max_context:,} tokens) is too small: "
                "start a new chat. Your message stays in the box.")
    elif short.max_context is not None:
        more = "No larger context fits this model here: start a new chat. Your message stays in the box."
    else:
        more = "How large a context fits this model here is not known: start a new chat. Your message stays in the box."
    return text, more


class OutgrownDialog(QMessageBox):
    """The non-modal question; `reload_button` is None when no larger context would do.

    Args:
        short: what was held back and the figures.
        parent: the window.
    """

    def __init__(self, short: ContextShortfall, parent: QWidget | None = None):
        text, more = outgrown_text(short)
        super().__init__(QMessageBox.Icon.Warning, "The chat outgrows its context", text, parent=parent)
        self.setInformativeText(more)
        self.short = short
        self.reload_button: QAbstractButton | None = None
        if short.can_reload:
            self.reload_button = self.addButton(f"Reload with {short.max_context:,} tokens",
                                                QMessageBox.ButtonRole.AcceptRole)
        self.new_chat_button = self.addButton("New chat", QMessageBox.ButtonRole.ActionRole)
        self.cancel_button = self.addButton(QMessageBox.StandardButton.Cancel)
        self.setDefaultButton(self.reload_button or self.new_chat_button)
        self.setEscapeButton(self.cancel_button)


class ContextPrompt(QObject):
    """Asks the question when the chat holds a message back (`ask`, for the controller's `context_outgrown`),
    and carries out the answer.

    Args:
        session: the chat session (it reloads with the larger context and sends).
        composer: the message box that holds the message meanwhile.
        parent: the widget the question is asked over (the window).
        attachments: the images and clips waiting above the box (sent with the message after a reload, then
            cleared).

    Signals:
        settings_changed(object): the chat's ChatSettings after a reload with a larger context (to show them).
        new_chat_requested(): the user chose New chat (the message stays in the box, to send there).
    """

    settings_changed = Signal(object)
    new_chat_requested = Signal()

    def __init__(self, session: ChatSession, composer: Composer, parent: QWidget,
                 attachments: Attachments | None = None):
        super().__init__(parent)
        self.session, self.composer, self._parent = session, composer, parent
        self.attachments = attachments
        self.dialog: OutgrownDialog | None = None

    @Slot(object)
    def ask(self, short: ContextShortfall) -> OutgrownDialog:
        """Open the question (non-blocking); the composer keeps the message meanwhile."""
        if self.dialog is not None:
            self.dialog.close()
        dialog = self.dialog = OutgrownDialog(short, self._parent)
        dialog.buttonClicked.connect(lambda button: self._answered(dialog, button))
        dialog.open()
        return dialog

    def _answered(self, dialog: OutgrownDialog, button: QAbstractButton) -> None:
        if dialog is self.dialog:
            self.dialog = None
        dialog.deleteLater()
        session, composer = self.session, self.composer
        if button is dialog.reload_button:
            sent = session.send_with_larger_context(dialog.short)
            if session.current is not None:  # the panel shows the larger context the chat now has
                self.settings_changed.emit(session.current.settings)
            if sent:
                composer.clear()
                composer.set_editing(None)
                if self.attachments is not None and not dialog.short.editing:  # they went with the message
                    self.attachments.clear()
        elif button is dialog.new_chat_button:
            # The box still holds the message as typed (the question is window-modal); an edit of the
            # old chat's last message becomes a new message of the new chat.
            composer.set_editing(None)
            self.new_chat_requested.emit()

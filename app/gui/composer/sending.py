"""What the message box sends, and its edits: a new message, or one of yours again as its new version.

Enter (or Send) sends the box's text; while one of your messages is being edited, the text goes in its
place, as a new version (a new branch from there). The box is cleared only once the session took the
message. Esc stops a reply, else leaves the edit. An edit ends, its text kept, when the chat shown no
longer holds the message it was to replace.

A message with documents, or in a chat that answers from a knowledge index, goes in two steps: what of them
fits is worked out on a pool thread (whole when they fit the context the chat leaves, else the passages that
answer the question: app/chat/document_context.py, counted by the model's tokenizer; then the knowledge's
passages in the room left), the box read-only meanwhile; then the session sends the question with that block.
A long PDF's retrieval takes a moment; the window never waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.chat.document_context import document_context
from app.chat.hints import BUSY_HINT
from app.chat.session import ChatSession
from app.gui.common.jobs import Jobs
from app.gui.composer.attachments import Attachments
from app.gui.composer.message_box import Composer
from app.services.documents.knowledge import KnowledgeError, open_knowledge
from app.services.documents.semantic import QuestionEmbedders
from app.services.history.sent_documents import SentDocuments
from app.services.history.store import Message

NOT_EDITING = "Not editing any more: that message is not in the chat shown."
IMAGES_READING = "The attached files are still being read: send again in a moment."
PREPARING = "Reading the documents for your question…"
PREPARING_AGAIN = "The documents are still being prepared: the message goes in a moment."


class Sending(QObject):
    """Sends the composer's text through the session, and puts your messages into the box to edit.

    Args:
        session: the chat session.
        composer: the message box.
        before_send: called before each send (the chat settings' pending edits are saved with it).
        parent: the Qt parent.

    Signals:
        notice(str): why nothing happened, for the status bar.
    """

    notice = Signal(str)

    def __init__(self, session: ChatSession, composer: Composer, before_send: Callable[[], None],
                 attachments: Attachments | None = None, parent: QObject | None = None,
                 data_dir: Path | None = None, questions: QuestionEmbedders | None = None):
        super().__init__(parent)
        self.data_dir = data_dir  # where the knowledge indexes are (None: no chat answers from one)
        # Questions embedded for a knowledge's search by meaning (used on the pool thread only).
        self.questions = questions
        self._said: set[str] = set()  # why a search went by words alone, said once each
        self.session, self.composer, self.attachments = session, composer, attachments
        self._before_send = before_send
        self._submitting = False
        self._preparing = False
        self._jobs = Jobs(self, max_threads=1)

    @Slot(str)
    def submit(self, text: str) -> None:
        """Send `text` with the images and clips attached (or, while editing, put it in the edited message's place
        as its new version, with the images and clips of the message it replaces)."""
        if self.attachments is not None and self.attachments.busy:
            self.notice.emit(IMAGES_READING)
            return
        if self._preparing:
            self.notice.emit(PREPARING_AGAIN)
            return
        documents = self.attachments is not None and bool(self.attachments.documents)
        if (documents or self._knowledge() is not None) and not self.composer.editing and text.strip():
            self._prepare_documents(text)
            return
        self._before_send()
        editing, was_editing = self.composer.editing_id, self.composer.editing
        self._submitting = True  # the chat opens again on its new branch: that ends no edit
        try:
            if editing is not None:
                accepted = self.session.edit_message(editing, text)
            elif self.composer.editing:
                accepted = self.session.edit_last_user_message(text)
            else:
                strip = self.attachments
                accepted = self.session.send(text, strip.images if strip else (), strip.clips if strip else ())
        finally:
            self._submitting = False
        if accepted:
            self._taken(with_attachments=not was_editing)  # an edit sends none: they wait for the next

    def _taken(self, with_attachments: bool) -> None:
        """The session took the message: the box empties, an edit ends, and what was attached went with it."""
        self.composer.clear()
        self.composer.set_editing(None)
        if self.attachments is not None and with_attachments:
            self.attachments.clear()

    def _prepare_documents(self, text: str) -> None:
        """Work out the documents' block for `text` in the background, then send both."""
        if self.session.busy:
            self.notice.emit(BUSY_HINT)
            return
        documents = self.attachments.documents if self.attachments is not None else ()
        question, knowledge = text.strip(), self._knowledge()
        budget, count = self.session.document_budget(question), self.session.token_counter()
        data_dir = self.data_dir

        questions = self.questions

        def prepare() -> tuple[SentDocuments | None, str | None]:
            index = open_knowledge(data_dir, knowledge) if knowledge is not None else None
            try:
                ranking, why = (questions.ranking(index, question) if index is not None and questions is not None
                                else (None, None))
                sent = document_context(documents, question, budget, count, knowledge=index,
                                        knowledge_ranking=ranking).sent()
            finally:
                if index is not None:
                    index.close()
            return (sent if sent.block or sent.notes else None), why  # None: the knowledge had nothing for it

        self._preparing = True
        self.composer.setReadOnly(True)  # what is typed now would be lost when the box is cleared
        self.notice.emit(PREPARING)
        self._jobs.run(prepare, lambda prepared: self._send_with(text, *prepared), self._not_prepared)

    def _knowledge(self) -> str | None:
        """The knowledge index the open chat answers from (None: none, or no data folder to find it in)."""
        current = self.session.current
        return current.settings.knowledge if current is not None and self.data_dir is not None else None

    def _send_with(self, text: str, documents: SentDocuments | None, words_only: str | None = None) -> None:
        self._preparing = False
        self.composer.setReadOnly(False)
        if words_only is not None and words_only not in self._said:
            self._said.add(words_only)
            self.notice.emit(f"Knowledge: {words_only}.")
        self._before_send()
        strip = self.attachments
        images, clips, files = (strip.images, strip.clips, strip.document_files) if strip is not None else ((), (), ())
        gone = strip.documents_gone() if strip is not None else []
        if self.session.send(text, images, clips, documents, files):
            self._taken(with_attachments=True)
            if gone:
                self.notice.emit(f"{', '.join(gone)} {'was' if len(gone) == 1 else 'were'} deleted or moved after "
                                 "being attached: what was read then was sent.")

    def _not_prepared(self, error: BaseException) -> None:
        self._preparing = False
        self.composer.setReadOnly(False)
        if isinstance(error, KnowledgeError):
            self.notice.emit(f"The message was not sent: {error}. Choose another with the Knowledge button.")
        else:
            self.notice.emit(f"The documents could not be prepared for the message: {error}")

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Wait for the documents being prepared (a closing window, a test)."""
        return self._jobs.wait(timeout_ms)

    def shutdown(self) -> None:
        """The window closes: the questions' embedding engines end (after the job at hand)."""
        self._jobs.wait(30_000)
        if self.questions is not None:
            self.questions.close()

    @Slot()
    def stop(self) -> None:
        """Stop the reply being written; with none, leave the edit (the box emptied)."""
        if self.session.busy:
            self.session.stop()
        elif self.composer.editing:
            self.composer.set_editing(None)
            self.composer.clear()

    @Slot()
    def edit_last_message(self) -> None:
        current = self.session.current
        mine = [m for m in self.session.store.list_messages(current.id) if m.role == "user"] if current else []
        if mine and not self.session.busy:
            self.composer.set_editing(mine[-1].content, mine[-1].id)

    @Slot(int)
    def edit_message(self, message_id: int) -> None:
        """Put one of your messages into the box; Enter sends it as its new version (a new branch from there)."""
        message = self.session.store.get_message(message_id)
        if self.session.busy:
            self.notice.emit(BUSY_HINT)
        elif message is not None and message.role == "user":
            self.composer.set_editing(message.content, message.id)

    def chat_shown(self, messages: list[Message]) -> None:
        """A chat was opened with these messages: an edit of a message not among them ends (its text stays)."""
        editing = self.composer.editing_id
        if editing is not None and all(m.id != editing for m in messages) and not self._submitting:
            self.composer.set_editing(None)
            self.notice.emit(NOT_EDITING)

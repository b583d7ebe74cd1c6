"""The strip that says why the chat history cannot be saved to or read, and what to do about it.

Read-only, full or unwritable: the chats are shown, sending and every other change is off with
the reason, and **Try again** opens the file again once the cause is fixed. Damaged: nothing can
be shown; **Recover chats** copies what SQLite can read into a new file (on a background
thread), keeps the damaged one beside it, and the window opens the new one.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.gui.common.jobs import Jobs
from app.gui.common.theme import set_tone
from app.services.history.backup import list_backups
from app.services.history.recovery import RecoveryReport, recover_history
from app.services.history.store import ChatStore, HistoryProblem, StoreError


class HistoryBanner(QFrame):
    """Shown while `store.problem` is set, and once after a recovery with what it saved.

    Args:
        store: the window's chat history.
        parent: the Qt parent.

    Signals:
        reopened(): the store opened its file again (recovered, or the cause fixed): show it afresh.
    """

    reopened = Signal()

    def __init__(self, store: ChatStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = store
        self.setObjectName("historyBanner")
        self.label = QLabel(wordWrap=True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.recover_button = QPushButton("Recover chats")
        self.retry_button = QPushButton("Try again")
        self.dismiss_button = QPushButton("Dismiss")
        self.recover_button.clicked.connect(self.recover)
        self.retry_button.clicked.connect(self.retry)
        self.dismiss_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.addWidget(self.label, 1)
        for button in (self.recover_button, self.retry_button, self.dismiss_button):
            layout.addWidget(button)
        self.jobs = Jobs(self, max_threads=1)
        self.show_state()

    def text(self) -> str:
        return self.label.text()

    def show_state(self) -> None:
        """Show the store's problem, or hide when there is none."""
        problem = self.store.problem
        if problem is None:
            self.hide()
            return
        set_tone(self, "error", frame=True)
        self.label.setText(_describe(problem))
        damaged = problem.kind == "damaged"
        self.recover_button.setVisible(damaged)
        self.recover_button.setEnabled(True)
        self.retry_button.setVisible(not damaged)
        self.dismiss_button.setVisible(False)  # the cause stays until it is fixed
        self.show()

    @Slot()
    def recover(self) -> None:
        """Recover the damaged file in the background; the window reopens it when done."""
        self.recover_button.setEnabled(False)
        self.label.setText(f"Recovering what can be read of {self.store.path}…")
        path = self.store.path
        self.jobs.run(lambda: recover_history(path), self._recovered, self._recovery_failed)

    @Slot()
    def retry(self) -> None:
        """Open the file again; the banner goes once it can be saved to."""
        try:
            self.store.reopen()
        except StoreError as exc:  # e.g. damaged now: the store stays as it was
            self.label.setText(f"{_describe(self.store.problem)}\n\nTried again: {exc}")
            return
        self.reopened.emit()  # the window shows what the file holds now
        self.show_state()
        if self.store.problem is not None:
            self.label.setText(f"{self.label.text()}\n\nTried again: it still cannot be saved to.")

    def _recovered(self, report: RecoveryReport) -> None:
        try:
            self.store.reopen()
        except StoreError as exc:
            self.label.setText(f"The recovered file cannot be opened either: {exc}")
            return
        self.reopened.emit()
        if self.store.problem is not None:  # e.g. recovered, but the disk is full now
            self.show_state()
            return
        set_tone(self, "ok", frame=True)
        self.label.setText(report.summary())
        self.recover_button.hide()
        self.dismiss_button.show()
        self.show()

    def _recovery_failed(self, exc: BaseException) -> None:
        self.recover_button.setEnabled(True)
        self.label.setText(f"{_describe(self.store.problem)}\n\nThe recovery failed: {exc}")


def _describe(problem: HistoryProblem | None) -> str:
    if problem is None:
        return ""
    if problem.kind != "damaged":
        return problem.message
    backups = list_backups(problem.path)
    where = f" Daily backups are in {backups[0].parent} (newest: {backups[0].name})." if backups else ""
    return problem.message + where

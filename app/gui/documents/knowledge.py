"""A chat's knowledge: the Knowledge button beside the message box and its dialog.

A knowledge index is a folder's documents cut into passages and indexed (app/services/documents/: BM25 over
SQLite FTS5, one file per index under the data folder, shared with `tailor index` and `tailor chat
--knowledge`). A chat may answer from one: each message then goes with the passages that answer it, cited as
[n] (the Sending step, app/gui/composer/sending.py). The dialog lists the indexes, indexes a folder into a new
one or brings one up to date (in the background, with progress and Cancel), and chooses the chat's.

The window places the button and connects `chosen` to the session (main_window.py); nothing here reaches into
the window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.jobs import Jobs
from app.gui.documents.indexing_job import IndexingJob, name_for_folder, progress_line, report_line
from app.services.documents.embedding import EmbedProgress
from app.services.documents.index.store import DocumentIndex
from app.services.documents.index_process import IndexOutcome
from app.services.documents.indexing import Progress
from app.services.documents.knowledge import KnowledgeError, knowledge_names, knowledge_path

SHORTCUT = "Ctrl+Shift+K"
NONE_TEXT = "Knowledge"


class KnowledgeButton(QToolButton):
    """Beside the message box: "Knowledge" or "Knowledge: notes" (the chat's index); a click opens the dialog."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setAccessibleName("Knowledge")
        self.setMaximumWidth(170)  # a long name is cut short here; the tooltip has it whole
        self.show_choice(None)

    def show_choice(self, name: str | None) -> None:
        """The open chat's knowledge (a chat opened, or chosen); nothing is emitted."""
        self.setText(f"{NONE_TEXT}: {name}" if name else NONE_TEXT)
        self.setToolTip(f"This chat answers from the knowledge index “{name}” ({SHORTCUT})" if name else
                        f"Answer from a folder of your documents: choose or make a knowledge index ({SHORTCUT})")


class KnowledgeDialog(QDialog):
    """The knowledge indexes: choose the chat's, or index a folder.

    Args:
        data_dir: Tailor's data folder (the indexes are under its knowledge/).
        current: the open chat's index (None: none).
        embedding_models: the library's embedding models (called in the background; the first embeds).

    Signals:
        chosen(object): the index the chat answers from now (its name), or None.
        holdings_shown(): each listed index's documents and passages are shown.
    """

    chosen = Signal(object)
    holdings_shown = Signal()  # what each index holds is in the list (read in the background)
    embedding_known = Signal()  # whether the library has an embedding model is known (embed_model)

    def __init__(self, data_dir: Path, current: str | None, parent: QWidget | None = None,
                 embedding_models: Callable[[], list[Path]] = list):
        super().__init__(parent)
        self._jobs = Jobs(self, max_threads=1)
        self.embed_model: Path | None = None  # the library's embedding model, once found
        self.setWindowTitle("Knowledge")
        self.resize(560, 420)
        self.data_dir, self.current = data_dir, current
        self.job: IndexingJob | None = None
        layout = QVBoxLayout(self)
        intro = QLabel("A chat that answers from a knowledge index gets, with each message, the passages of your "
                       "documents that answer it, cited as [1], [2]… Index a folder (PDF, DOCX, Markdown, text, "
                       "code, HTML, CSV) to make one; index it again to bring it up to date.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.meaning = QLabel("Looking for an embedding model in your library…")
        self.meaning.setWordWrap(True)
        layout.addWidget(self.meaning)
        self.list = QListWidget()
        self.list.setAccessibleName("Knowledge indexes")
        self.list.itemDoubleClicked.connect(lambda _item: self.use_selected())
        layout.addWidget(self.list, 1)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.progress = QProgressBar()
        self.progress.hide()
        layout.addWidget(self.progress)
        row = QHBoxLayout()
        self.index_button = QPushButton("Index a folder…")
        self.index_button.clicked.connect(self.choose_folder)
        self.files_button = QPushButton("Add files…")
        self.files_button.setToolTip("Add documents to the selected index (or to a new one): a chat's knowledge can be "
                                     "a few files as well as a folder")
        self.files_button.clicked.connect(self.choose_files)
        self.cancel_button = QPushButton("Cancel indexing")
        self.cancel_button.clicked.connect(self.cancel_indexing)
        self.cancel_button.hide()
        self.use_button = QPushButton("Use in this chat")
        self.use_button.setDefault(True)
        self.use_button.clicked.connect(self.use_selected)
        self.none_button = QPushButton("No knowledge")
        self.none_button.clicked.connect(self.use_none)
        for button in (self.index_button, self.files_button, self.cancel_button):
            row.addWidget(button)
        row.addStretch(1)
        for button in (self.none_button, self.use_button):
            row.addWidget(button)
        layout.addLayout(row)
        self.refresh()
        self._jobs.run(embedding_models, self._show_embedding_model, lambda _exc: self._show_embedding_model([]))

    def _show_embedding_model(self, found: list[Path]) -> None:
        self.embed_model = found[0] if found else None
        if self.embed_model is not None:
            self.meaning.setText(f"Passages are found by their words and by their meaning: indexing embeds them with "
                                 f"{self.embed_model.name}, from your library.")
        else:
            self.meaning.setText("Passages are found by their words (BM25). To find them by meaning too, get a small "
                                 "embedding model from the Models window (Ctrl+M), e.g. a bge-small or "
                                 "nomic-embed-text GGUF, and index the folder again.")
        self.embedding_known.emit()

    def refresh(self, select: str | None = None) -> None:
        """List the indexes there are, `select` (else the chat's) selected; what each holds is read in the
        background (opening an index that was just written can take a moment) and shown when known."""
        self.list.clear()
        names = knowledge_names(self.data_dir)
        for name in names:
            item = QListWidgetItem(self._item_text(name, "…"))
            item.setData(Qt.ItemDataRole.UserRole, name)
            self.list.addItem(item)
            if name == (select or self.current):
                self.list.setCurrentItem(item)
        self.use_button.setEnabled(self.list.count() > 0)
        if not self.list.count() and self.job is None:
            self.status.setText("There is no knowledge index yet: index a folder to make one.")
        data_dir = self.data_dir
        self._jobs.run(lambda: {name: _holds(data_dir, name) for name in names}, self._show_holdings,
                       lambda _exc: None)

    def _item_text(self, name: str, holds: str) -> str:
        return f"{name} · {holds}" + (" · this chat's" if name == self.current else "")

    def _show_holdings(self, holdings: dict[str, str]) -> None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            name = item.data(Qt.ItemDataRole.UserRole)
            if name in holdings:
                item.setText(self._item_text(name, holdings[name]))
        self.holdings_shown.emit()

    def selected(self) -> str | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    @Slot()
    def use_selected(self) -> None:
        name = self.selected()
        if name is not None:
            self.chosen.emit(name)
            self.accept()

    @Slot()
    def use_none(self) -> None:
        self.chosen.emit(None)
        self.accept()

    @Slot()
    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Index a folder")
        if not folder:
            return
        suggested = self.selected() if self.selected() == name_for_folder(Path(folder)) else name_for_folder(Path(folder))
        name, ok = QInputDialog.getText(self, "Index a folder", "Name of the knowledge index:", text=suggested)
        if ok and name.strip():
            self.index_folder(Path(folder), name.strip())

    @Slot()
    def choose_files(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self, "Add files to a knowledge index")
        if not names:
            return
        suggested = self.selected() or name_for_folder(Path(names[0]).parent)
        name, ok = QInputDialog.getText(self, "Add files", "Name of the knowledge index:", text=suggested)
        if ok and name.strip():
            self.index_folder([Path(n) for n in names], name.strip())

    def index_folder(self, folder: Path | list[Path], name: str) -> bool:
        """Index `folder` (or a list of files) into `name` in the background (made, or brought up to date); False,
        said in the dialog, for a name that cannot be one or while another run is under way."""
        if self.job is not None:
            self.status.setText("A folder is being indexed: wait for it, or cancel it.")
            return False
        try:
            knowledge_path(self.data_dir, name)
        except KnowledgeError as exc:
            self.status.setText(str(exc))
            return False
        job = self.job = IndexingJob(self.data_dir, name, folder, self, embed_model=self.embed_model)
        job.progress.connect(self._on_progress)
        # Bound slots of this dialog, never lambdas: the job emits on its own thread, and a slot of a QObject
        # runs on that object's thread (queued), where a lambda would run on the job's.
        job.finished.connect(self._on_finished)
        job.failed.connect(self._on_failed)
        what = folder if isinstance(folder, Path) else f"{len(folder)} file{'s' * (len(folder) != 1)}"
        self.status.setText(f"Indexing {what} into “{name}”…")
        self.progress.setRange(0, 0)  # busy until the folder is listed
        self.progress.show()
        self.cancel_button.show()
        self.index_button.setEnabled(False)
        self.files_button.setEnabled(False)
        job.start()
        return True

    @Slot()
    def cancel_indexing(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.status.setText("Stopping after the file being read…")

    @Slot(object)
    def _on_progress(self, progress: Progress | EmbedProgress) -> None:
        if self.job is None:
            return
        if isinstance(progress, EmbedProgress):
            self.progress.setRange(0, max(progress.total, 1))
            self.progress.setValue(progress.done)
        else:
            self.progress.setRange(0, max(progress.bytes_total, 1))
            self.progress.setValue(progress.bytes_done)
        self.status.setText(f"Indexing into “{self.job.name}”: {progress_line(progress)}")

    @Slot(object)
    def _on_finished(self, outcome: IndexOutcome) -> None:
        name = self.job.name if self.job is not None else ""
        self._job_ended()
        skipped = "".join(f"\n{s.path.name}: {s.reason}" for s in outcome.report.skipped[:5])
        self.status.setText(report_line(outcome, name) + skipped)
        self.refresh(select=name)

    @Slot(str)
    def _on_failed(self, reason: str) -> None:
        self._job_ended()
        self.status.setText(reason)
        self.refresh()

    def _job_ended(self) -> None:
        if self.job is not None:
            self.job.wait()
        self.job = None
        self.progress.hide()
        self.cancel_button.hide()
        self.index_button.setEnabled(True)
        self.files_button.setEnabled(True)

    def done(self, result: int) -> None:  # noqa: D102 (Qt override: closing cancels a run, keeping what it did)
        if self.job is not None:
            self.job.cancel()
            self.job.wait()
        super().done(result)


def _holds(data_dir: Path, name: str) -> str:
    """What an index holds ("12 documents, 340 passages"), or why it cannot be read."""
    try:
        with DocumentIndex(knowledge_path(data_dir, name)) as index:
            documents, passages = index.counts()
    except Exception as exc:  # a damaged or locked file: named in the list, never a crash of the dialog
        return f"cannot be read ({exc})"
    return f"{documents:,} documents, {passages:,} passages"

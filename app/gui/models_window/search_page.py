"""SearchPage: a query box, a GGUF/AWQ filter and the matching repos of the hub.

The search runs on a pool thread; a failure (offline, hub unreachable) is shown in the
page's status line, never in a dialog.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.engine_availability import mark_torch_choices
from app.gui.common.jobs import Jobs
from app.gui.models_window.formatting import human_date
from engine.torch_available import awq_engine_status
from models.hub.client import HubClient, HubError, RepoSummary

REPO_ROLE = Qt.ItemDataRole.UserRole
FILTERS = (("GGUF", "gguf"), ("AWQ", "awq"), ("GPTQ", "gptq"), ("FP8", "fp8"), ("Any", None))


def describe_error(exc: BaseException) -> str:
    """One line for a failure of a hub job."""
    return exc.message if isinstance(exc, HubError) else f"{type(exc).__name__}: {exc}"


class SearchPage(QWidget):
    """Search the hub.

    Args:
        jobs: where the searches run.
        client_factory: makes the HubClient (on the pool thread); default `HubClient()`,
            which reads HF_ENDPOINT and HF_HUB_OFFLINE.
        parent: the Qt parent.

    Signals:
        repo_chosen(str): the user opened a result (double-click, Enter or "Show files").
        searched(): a search ended (with results or with a message in `status`).
    """

    repo_chosen = Signal(str)
    searched = Signal()

    def __init__(self, jobs: Jobs, client_factory: Callable[[], HubClient] = HubClient,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.jobs = jobs
        self.client_factory = client_factory
        self._generation = 0
        self.query = QLineEdit(placeholderText="Search models on the hub, e.g. qwen 7b instruct")
        self.filter = QComboBox()
        for label, kind in FILTERS:
            self.filter.addItem(label, kind)
        mark_torch_choices(self.filter, awq_engine_status())  # e.g. a bundle without PyTorch
        self.search_button = QPushButton("Search")
        self.results = QListWidget()
        self.open_button = QPushButton("Show files")
        self.status = QLabel("", wordWrap=True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.addWidget(self.query, 1)
        row.addWidget(self.filter)
        row.addWidget(self.search_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.results, 1)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.open_button)
        layout.addLayout(bottom)
        self.query.returnPressed.connect(self.search)
        self.search_button.clicked.connect(self.search)
        self.results.itemActivated.connect(self._open)  # double-click or Enter
        self.open_button.clicked.connect(self._open_current)

    @Slot()
    def search(self) -> None:
        """Start a search with the box's text and filter; a newer search supersedes a running one."""
        self._generation += 1
        generation = self._generation
        query, kind = self.query.text().strip(), self.filter.currentData()
        self.status.setText(f"Searching for “{query}”…" if query else "Searching…")
        factory = self.client_factory
        self.jobs.run(lambda: factory().search(query, kind=kind, limit=50),
                      lambda repos: self._show(generation, repos),
                      lambda exc: self._fail(generation, exc))

    def repo_ids(self) -> list[str]:
        return [self.results.item(i).data(REPO_ROLE) for i in range(self.results.count())]

    def _show(self, generation: int, repos: list[RepoSummary]) -> None:
        if generation != self._generation:
            return
        self.results.clear()
        for repo in repos:
            flags = " · gated" if repo.gated else ""
            item = QListWidgetItem(f"{repo.id}\n    {repo.downloads:,} downloads · updated "
                                   f"{human_date(repo.last_modified)}{flags}")
            item.setData(REPO_ROLE, repo.id)
            item.setToolTip(", ".join(repo.tags[:12]))
            self.results.addItem(item)
        self.status.setText(f"{len(repos)} repos" if repos else "No repos match.")
        if repos:
            self.results.setCurrentRow(0)
        self.searched.emit()

    def _fail(self, generation: int, exc: BaseException) -> None:
        if generation != self._generation:
            return
        self.results.clear()
        self.status.setText(describe_error(exc))
        self.searched.emit()

    @Slot(QListWidgetItem)
    def _open(self, item: QListWidgetItem) -> None:
        self.repo_chosen.emit(item.data(REPO_ROLE))

    @Slot()
    def _open_current(self) -> None:
        item = self.results.currentItem()
        if item is not None:
            self._open(item)

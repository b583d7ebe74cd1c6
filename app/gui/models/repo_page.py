"""RepoPage: a repo's file groups with their size, the plan's verdict for this machine and a Download button.

The recommended group (the decision tree's pick) is marked ★; "Why?" shows the reasons.
Reading the repo and its GGUF header runs on a pool thread.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.models.formatting import human_date, human_size
from app.gui.models.search_page import describe_error
from app.gui.models.workers import Jobs
from app.machine import detect_machine
from app.pull_plan import GroupVerdict, RepoAssessment, assess_repo, build_request, with_extras
from models.hub import HubClient
from models.plan import Machine

STAR = "★"
COLUMNS = ("", "File", "Quant", "Size", "On this machine", "", "")
COL_STAR, COL_NAME, COL_QUANT, COL_SIZE, COL_VERDICT, COL_WHY, COL_DOWNLOAD = range(7)
DEFAULT_CONTEXT = 4096


def this_machine() -> Machine:
    return Machine.from_profile(detect_machine())


def show_reasons(parent: QWidget, title: str, reasons: tuple[str, ...]) -> QMessageBox:
    """Show why a verdict is what it is, without blocking (tests replace this function)."""
    box = QMessageBox(QMessageBox.Icon.Information, title, "\n".join(f"• {r}" for r in reasons),
                      QMessageBox.StandardButton.Ok, parent)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()
    return box


class RepoPage(QWidget):
    """One repo's files as this machine sees them.

    Args:
        jobs: where the reads run.
        client_factory: makes the HubClient (on the pool thread).
        machine_factory: the hardware to plan for (on the pool thread); default: this machine.
        parent: the Qt parent.

    Signals:
        loaded(): the page shows a repo, or a message in `status` saying why not.
        download_requested(object, object): a `DownloadRequest` and the auth headers for it.
    """

    loaded = Signal()
    download_requested = Signal(object, object)

    def __init__(self, jobs: Jobs, client_factory: Callable[[], HubClient] = HubClient,
                 machine_factory: Callable[[], Machine] = this_machine, parent: QWidget | None = None):
        super().__init__(parent)
        self.jobs = jobs
        self.client_factory = client_factory
        self.machine_factory = machine_factory
        self.context = DEFAULT_CONTEXT
        self.repo_id: str | None = None
        self.assessment: RepoAssessment | None = None
        self._client: HubClient | None = None
        self._generation = 0
        self.header = QLabel("Pick a repo on the Search tab.", wordWrap=True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("", wordWrap=True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(COL_NAME, QHeaderView.ResizeMode.Stretch)
        for col in (COL_STAR, COL_QUANT, COL_SIZE, COL_VERDICT, COL_WHY, COL_DOWNLOAD):
            head.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)

    @Slot(str)
    def load(self, repo_id: str) -> None:
        """Read `repo_id` in the background and show its groups when done."""
        self._generation += 1
        generation = self._generation
        self.repo_id, self.assessment, self._client = repo_id, None, None
        self.table.setRowCount(0)
        self.header.setText(f"<b>{repo_id}</b>")
        self.status.setText("Reading the repo and planning its files for this machine…")
        client_factory, machine_factory, context = self.client_factory, self.machine_factory, self.context

        def work() -> tuple[HubClient, RepoAssessment]:
            client = client_factory()
            details = client.repo_details(repo_id)
            return client, assess_repo(client, details, machine_factory(), context=context)

        self.jobs.run(work, lambda result: self._show(generation, *result), lambda exc: self._fail(generation, exc))

    def verdicts(self) -> list[GroupVerdict]:
        return list(self.assessment.groups) if self.assessment else []

    def row_of(self, name: str) -> int:
        """The table row of the group named `name` (file name, split stem) or of quant level `name`."""
        for row, g in enumerate(self.verdicts()):
            if name in (g.group.name, g.group.quant):
                return row
        raise KeyError(name)

    def download_button(self, row: int) -> QPushButton:
        return self.table.cellWidget(row, COL_DOWNLOAD)

    def why_button(self, row: int) -> QPushButton:
        return self.table.cellWidget(row, COL_WHY)

    def _show(self, generation: int, client: HubClient, assessment: RepoAssessment) -> None:
        if generation != self._generation:
            return
        self._client, self.assessment = client, assessment
        d = assessment.details
        bits = [f"commit {d.sha[:10]}", f"updated {human_date(d.last_modified)}"]
        if d.license:
            bits.append(f"license {d.license}")
        if d.gated:
            bits.append("gated: needs your token")
        self.header.setText(f"<b>{d.id}</b> · " + " · ".join(bits))
        pick = assessment.recommended
        if pick is not None:
            self.status.setText(f"{STAR} {pick.group.quant or pick.group.name} is the recommended file for this "
                                f"machine at {self.context:,} tokens of context: {pick.verdict}.")
        else:
            self.status.setText(assessment.note or "No file of this repo fits this machine.")
        self.table.setRowCount(len(assessment.groups))
        for row, g in enumerate(assessment.groups):
            self._fill_row(row, g)
        self.loaded.emit()

    def _fill_row(self, row: int, g: GroupVerdict) -> None:
        group = g.group
        cells = {
            COL_STAR: STAR if g.recommended else "",
            COL_NAME: group.name + (f" ({len(group.files)} parts)" if len(group.files) > 1 else ""),
            COL_QUANT: group.quant or group.format.upper(),
            COL_SIZE: human_size(group.total_size),
            COL_VERDICT: g.verdict,
        }
        for col, text in cells.items():
            item = QTableWidgetItem(text)
            item.setToolTip("\n".join(g.reasons))
            if g.recommended:
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            self.table.setItem(row, col, item)
        why = QPushButton("Why?")
        why.clicked.connect(lambda: show_reasons(self, f"{group.name}: {g.verdict}", g.reasons))
        self.table.setCellWidget(row, COL_WHY, why)
        download = QPushButton("Download")
        download.setEnabled(group.complete)
        download.clicked.connect(lambda: self._download(g))
        self.table.setCellWidget(row, COL_DOWNLOAD, download)

    def _download(self, g: GroupVerdict) -> None:
        if self.assessment is None or self._client is None:
            return
        details = self.assessment.details
        try:
            request = build_request(self._client, details, with_extras(details, g.group), "main")
        except Exception as exc:  # a refused name: say so on the page
            self.status.setText(describe_error(exc))
            return
        self.download_requested.emit(request, self._client.auth_headers())

    def _fail(self, generation: int, exc: BaseException) -> None:
        if generation != self._generation:
            return
        self.status.setText(describe_error(exc))
        self.loaded.emit()

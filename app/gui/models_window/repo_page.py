"""RepoPage: a repo's file groups with their size, the plan's verdict for this machine and a Download button.

The recommended group (the decision tree's pick) is marked ★. Each verdict says the largest context
that fits; beside it a small bar per device shows the forecast (weights, KV cache, compute) against
the free memory, and "Why?" opens the plan with those numbers and the reasons (plan_dialog.py). The page plans at its Context and KV cache controls
(the open chat's settings when the window opens: Context Auto unless the chat says otherwise); a
change re-plans the files already read, without the network. Reading the repo and its GGUF header,
and planning, run on a pool thread.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.context_box import AutoCapBox, ContextBox
from app.gui.common.jobs import Jobs
from app.gui.common.plan_view import fit_text
from app.gui.models_window.forecast_bar import ForecastBar
from app.gui.models_window.formatting import human_date, human_size
from app.gui.models_window.plan_dialog import PlanDialog, plan_text
from app.gui.models_window.search_page import describe_error
from app.services.planning.machine import detect_machine
from app.services.planning.plan_room import DeviceRoom, device_rooms
from app.services.planning.pull_plan import (
    GroupVerdict,
    RepoAssessment,
    assess_candidates,
    build_request,
    read_candidates,
    with_extras,
)
from models.hub.client import HubClient
from models.hub.draft_suggestions import draft_for
from models.plan.candidates import Candidate
from models.plan.machine import Machine

STAR = "★"
COLUMNS = ("", "File", "Quant", "Size", "On this machine", "Memory forecast", "", "")
COL_STAR, COL_NAME, COL_QUANT, COL_SIZE, COL_VERDICT, COL_FORECAST, COL_WHY, COL_DOWNLOAD = range(8)
KV_TYPES = ("f16", "q8_0", "q4_0")


def this_machine() -> Machine:
    return Machine.from_profile(detect_machine())


class RepoPage(QWidget):
    """One repo's files as this machine sees them.

    Args:
        jobs: where the reads run.
        client_factory: makes the HubClient (on the pool thread).
        machine_factory: the hardware to plan for (on the pool thread); default: this machine.
        parent: the Qt parent.

    Signals:
        loaded(): the page shows a repo (read, or re-planned after a change of context or KV
            type), or a message in `status` saying why not.
        download_requested(object, object): a `DownloadRequest` and the auth headers for it.
        repo_requested(str): the user asked for another repo's page (the draft model suggested).
    """

    loaded = Signal()
    download_requested = Signal(object, object)
    repo_requested = Signal(str)

    def __init__(self, jobs: Jobs, client_factory: Callable[[], HubClient] = HubClient,
                 machine_factory: Callable[[], Machine] = this_machine, parent: QWidget | None = None):
        super().__init__(parent)
        self.jobs = jobs
        self.client_factory = client_factory
        self.machine_factory = machine_factory
        self.repo_id: str | None = None
        self.assessment: RepoAssessment | None = None
        self.machine: Machine | None = None  # what the shown verdicts were planned for
        self.plan_dialog: PlanDialog | None = None  # made at the first Why?, then filled again
        self._client: HubClient | None = None
        self._read: tuple[list[Candidate], str | None] | None = None  # the repo's candidates, and why none
        self._generation = 0
        self.context = ContextBox()
        self.context.setToolTip("The context to plan for: Auto is the largest that fits, up to the cap")
        self.auto_cap = AutoCapBox()
        self.auto_cap.setToolTip("The most tokens Auto chooses")
        self.kv_type = QComboBox()
        self.kv_type.addItems(KV_TYPES)
        self.kv_type.setToolTip("KV cache type to plan for: q8_0 halves its memory, q4_0 quarters it")
        controls = QHBoxLayout()
        for label, widget in (("Context", self.context), ("Auto cap", self.auto_cap), ("KV cache", self.kv_type)):
            controls.addWidget(QLabel(label))
            controls.addWidget(widget)
        controls.addStretch(1)
        for box in (self.context, self.auto_cap):
            box.valueChanged.connect(self.replan)
        self.context.valueChanged.connect(lambda _v: self.auto_cap.setEnabled(self.context.context() is None))
        self.kv_type.currentTextChanged.connect(self.replan)
        self.header = QLabel("Pick a repo on the Search tab.", wordWrap=True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("", wordWrap=True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The small model of the family that drafts for this one (speculative decoding), when there is one
        self.draft_hint = QLabel("", wordWrap=True)
        self.draft_hint.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                                | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.draft_hint.linkActivated.connect(self.repo_requested)
        self.draft_hint.hide()
        self.table = _files_table()
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(controls)
        layout.addWidget(self.status)
        layout.addWidget(self.draft_hint)
        layout.addWidget(self.table, 1)

    def set_plan_settings(self, n_ctx: int | None, auto_cap: int, kv_type: str) -> None:
        """Plan for these (the open chat's context, auto cap and KV type); a shown repo is planned again
        if they differ from the page's."""
        before = self._settings()
        for widget in (self.context, self.auto_cap, self.kv_type):
            widget.blockSignals(True)
        try:
            self.context.set_context(n_ctx)
            self.auto_cap.setValue(auto_cap)
            if kv_type in KV_TYPES:
                self.kv_type.setCurrentText(kv_type)
        finally:
            for widget in (self.context, self.auto_cap, self.kv_type):
                widget.blockSignals(False)
        self.auto_cap.setEnabled(self.context.context() is None)
        if self._settings() != before:
            self.replan()

    def _settings(self) -> dict:
        return {"context": self.context.context(), "kv_type": self.kv_type.currentText(),
                "auto_context_cap": self.auto_cap.value()}

    def _context_text(self) -> str:
        n_ctx = self.context.context()
        if n_ctx is None:
            return f"Context Auto (up to {self.auto_cap.value():,} tokens)"
        return f"{n_ctx:,} tokens of context"

    @Slot(str)
    def load(self, repo_id: str) -> None:
        """Read `repo_id` in the background and show its groups when done."""
        self._generation += 1
        generation = self._generation
        self.repo_id, self.assessment, self._client, self._read = repo_id, None, None, None
        self.table.setRowCount(0)
        self.header.setText(f"<b>{repo_id}</b>")
        self.status.setText("Reading the repo and planning its files for this machine…")
        client_factory, machine_factory, settings = self.client_factory, self.machine_factory, self._settings()

        def work() -> tuple[HubClient, tuple[list[Candidate], str | None], Machine, RepoAssessment]:
            client = client_factory()
            details = client.repo_details(repo_id)
            read = read_candidates(client, details)
            machine = machine_factory()
            return client, read, machine, assess_candidates(details, read[0], machine, note=read[1], **settings)

        self.jobs.run(work, lambda result: self._show(generation, settings, *result),
                      lambda exc: self._fail(generation, exc))

    @Slot()
    def replan(self) -> None:
        """Plan the files already read again at the page's context and KV type (in the background)."""
        if self.assessment is None or self._read is None or self._client is None:
            return  # nothing read yet, or a read is under way: `_show` plans again if the settings changed
        self._generation += 1
        generation = self._generation
        client, read, details = self._client, self._read, self.assessment.details
        machine_factory, settings = self.machine_factory, self._settings()
        self.status.setText(f"Planning its files at {self._context_text()}, {settings['kv_type']} KV cache…")

        def work() -> tuple[HubClient, tuple[list[Candidate], str | None], Machine, RepoAssessment]:
            machine = machine_factory()
            return client, read, machine, assess_candidates(details, read[0], machine, note=read[1], **settings)

        self.jobs.run(work, lambda result: self._show(generation, settings, *result),
                      lambda exc: self._fail(generation, exc))

    def verdicts(self) -> list[GroupVerdict]:
        return list(self.assessment.groups) if self.assessment else []

    def row_of(self, name: str) -> int:
        """The table row of the group named `name` (file name, split stem) or of quant level `name`."""
        for row, g in enumerate(self.verdicts()):
            if name in (g.group.name, g.group.quant):
                return row
        raise KeyError(name)

    @staticmethod
    def verdict_of(g: GroupVerdict) -> str:
        """The verdict the table shows: with the largest context that fits, when the group was planned."""
        return fit_text(g.plan) if g.plan is not None else g.verdict

    def download_button(self, row: int) -> QPushButton:
        return self.table.cellWidget(row, COL_DOWNLOAD)

    def why_button(self, row: int) -> QPushButton:
        return self.table.cellWidget(row, COL_WHY)

    def forecast_bar(self, row: int) -> ForecastBar | None:
        """The row's bar; None for a file without a plan (a projector, an incomplete split set)."""
        widget = self.table.cellWidget(row, COL_FORECAST)
        return widget if isinstance(widget, ForecastBar) else None

    def rooms_of(self, g: GroupVerdict) -> tuple[DeviceRoom, ...]:
        """`g`'s forecast per device beside the memory of the machine it was planned for."""
        return device_rooms(g.plan, self.machine) if g.plan is not None and self.machine is not None else ()

    def _show(self, generation: int, settings: dict, client: HubClient, read: tuple[list[Candidate], str | None],
              machine: Machine, assessment: RepoAssessment) -> None:
        if generation != self._generation:
            return
        self._client, self._read, self.machine, self.assessment = client, read, machine, assessment
        if settings != self._settings():  # changed while the repo was read: plan for what the page shows now
            self.replan()
            return
        d = assessment.details
        bits = [f"commit {d.sha[:10]}", f"updated {human_date(d.last_modified)}"]
        if d.license:
            bits.append(f"license {d.license}")
        if d.gated:
            bits.append("gated: needs your token")
        self.header.setText(f"<b>{d.id}</b> · " + " · ".join(bits))
        pick = assessment.recommended
        if pick is not None:
            at = self._context_text()
            if pick.plan is not None and self.context.context() is None:
                at += f": {pick.plan.context:,} tokens"
            self.status.setText(f"{STAR} {pick.group.quant or pick.group.name} is the recommended file for this "
                                f"machine at {at}, {self.kv_type.currentText()} KV cache: "
                                f"{self.verdict_of(pick)}.")
        else:
            self.status.setText(assessment.note or "No file of this repo fits this machine.")
        self._show_draft_hint(d.id, assessment)
        self.table.setRowCount(len(assessment.groups))
        for row, g in enumerate(assessment.groups):
            self._fill_row(row, g)
        self.loaded.emit()

    def _show_draft_hint(self, repo_id: str, assessment: RepoAssessment) -> None:
        suggestion = draft_for(repo_id) if any(g.group.format == "gguf" for g in assessment.groups) else None
        self.draft_hint.setVisible(suggestion is not None)
        if suggestion is not None:
            self.draft_hint.setText(
                f"Faster replies: <a href=\"{suggestion.repo}\">{suggestion.repo}</a> ({suggestion.family}, the "
                f"same tokenizer) can draft for this model (speculative decoding). Get its {suggestion.quant} file "
                "too: with it in your library, Auto drafts with it.")

    def _fill_row(self, row: int, g: GroupVerdict) -> None:
        group = g.group
        # The page groups files without reading config.json; the plan's candidate did read it, so a
        # GPTQ or FP8 checkpoint is named by its quantization ("GPTQ 4-bit"), not "SAFETENSORS".
        quant = (g.plan.quant if g.plan is not None and group.format == "safetensors" else None) or group.quant
        cells = {
            COL_STAR: STAR if g.recommended else "",
            COL_NAME: group.name + (f" ({len(group.files)} parts)" if len(group.files) > 1 else ""),
            COL_QUANT: quant or group.format.upper(),
            COL_SIZE: human_size(group.total_size),
            COL_VERDICT: self.verdict_of(g),
        }
        for col, text in cells.items():
            item = QTableWidgetItem(text)
            # The name cell may be elided: its tooltip starts with the whole name.
            item.setToolTip("\n".join(((cells[COL_NAME],) if col == COL_NAME else ()) + tuple(g.reasons)))
            if g.recommended:
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            self.table.setItem(row, col, item)
        rooms = self.rooms_of(g)
        if rooms:
            bar = ForecastBar(rooms, group.name)
            self.table.setCellWidget(row, COL_FORECAST, bar)
            # Tall enough for a GPU plan's two lanes (GPU and CPU); set, not measured from the texts,
            # which wrap while the columns are still narrow.
            rows = self.table.verticalHeader()
            self.table.setRowHeight(row, max(rows.defaultSectionSize(), bar.sizeHint().height() + 4))
        else:
            self.table.removeCellWidget(row, COL_FORECAST)
        why = QPushButton("Why?")
        why.setToolTip("The plan for this file: its memory per device and the reasons")
        why.setAccessibleName(f"Why? {group.name}")
        why.clicked.connect(lambda: self.show_plan(g))
        self.table.setCellWidget(row, COL_WHY, why)
        download = QPushButton("Download")
        download.setEnabled(group.complete)
        download.clicked.connect(lambda: self._download(g))
        self.table.setCellWidget(row, COL_DOWNLOAD, download)

    def show_plan(self, g: GroupVerdict) -> PlanDialog:
        """Why? for `g`: the plan with its numbers and reasons, in the page's (non-modal) dialog."""
        if self.plan_dialog is None:
            self.plan_dialog = PlanDialog(self)
        heading = f"<b>{html.escape(g.group.name)}</b>: {html.escape(self.verdict_of(g))}" + (f" {STAR} recommended" if g.recommended else "")
        self.plan_dialog.show_plan(f"Why? {g.group.name}", heading, plan_text(g, self.rooms_of(g)))
        return self.plan_dialog

    def _download(self, g: GroupVerdict) -> None:
        if self.assessment is None or self._client is None:
            return
        details = self.assessment.details
        try:
            request = build_request(self._client, details, with_extras(details, g.group, g.projector), "main")
        except Exception as exc:  # a refused name: say so on the page
            self.status.setText(describe_error(exc))
            return
        self.download_requested.emit(request, self._client.auth_headers())

    def _fail(self, generation: int, exc: BaseException) -> None:
        if generation != self._generation:
            return
        self.status.setText(describe_error(exc))
        self.loaded.emit()


def _files_table() -> QTableWidget:
    """The table of a repo's files (COLUMNS): read-only, whole rows selected, the name taking the room left."""
    table = QTableWidget(0, len(COLUMNS))
    table.setHorizontalHeaderLabels(COLUMNS)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.verticalHeader().hide()
    # File names of one repo differ at the end (the quant level): elide in the middle, on one line.
    table.setWordWrap(False)
    table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    table.horizontalHeaderItem(COL_FORECAST).setToolTip(
        "Each device's forecast: weights, KV cache (lighter or darker) and compute (grey) against its free "
        "memory; the tick is what the plan may use of it, and a hatched part is over that limit")
    head = table.horizontalHeader()
    head.setSectionResizeMode(COL_NAME, QHeaderView.ResizeMode.Stretch)
    for col in (COL_STAR, COL_QUANT, COL_SIZE, COL_VERDICT, COL_FORECAST, COL_WHY, COL_DOWNLOAD):
        head.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
    return table

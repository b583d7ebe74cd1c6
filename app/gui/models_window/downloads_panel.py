"""DownloadsPanel: one row per download with a progress bar, its figures and Pause/Resume/Cancel."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.theme import set_tone
from app.gui.models_window.download_bridge import DownloadBridge
from app.gui.models_window.formatting import human_eta, human_size
from models.download.handle import Download
from models.download.request import DownloadRequest, Progress, State, StateChanged

_STATE_WORDS = {"queued": "queued", "running": "downloading", "paused": "paused", "done": "done",
                "failed": "failed", "cancelled": "cancelled"}
_PERMILLE = 1000


class DownloadRow(QFrame):
    """One download: what it is, a progress bar, a status line and its buttons.

    Args:
        item: the download.
        bridge: where Pause/Resume/Cancel go.
        parent: the Qt parent.
    """

    def __init__(self, item: Download, bridge: DownloadBridge, parent: QWidget | None = None):
        super().__init__(parent)
        self.download_id = item.id
        # Every download starts queued, and the row is made (bridge.started) before any of its events, all
        # posted, reach the GUI thread: it follows them in order. Taking item.state instead could show a
        # state its worker reached already, then step back to the "queued" still on its way.
        self.state: State = "queued"
        self.total = item.total_bytes
        self.done_bytes = 0
        self.error_text = ""
        self.setFrameShape(QFrame.Shape.StyledPanel)
        files = item.request.files
        what = files[0].path_in_repo + (f" (+{len(files) - 1} files)" if len(files) > 1 else "")
        self.title = QLabel(f"<b>{item.request.repo_id}</b> · {what}")
        self.bar = QProgressBar()
        self.bar.setRange(0, _PERMILLE)
        self.bar.setTextVisible(True)
        self.status = QLabel("queued", wordWrap=True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.pause_button = QPushButton("Pause")
        self.resume_button = QPushButton("Resume")
        self.cancel_button = QPushButton("Cancel")
        self.pause_button.clicked.connect(lambda: bridge.pause(self.download_id))
        self.resume_button.clicked.connect(lambda: bridge.resume(self.download_id))
        self.cancel_button.clicked.connect(lambda: bridge.cancel(self.download_id))
        grid = QGridLayout(self)
        grid.addWidget(self.title, 0, 0, 1, 4)
        grid.addWidget(self.bar, 1, 0)
        grid.addWidget(self.pause_button, 1, 1)
        grid.addWidget(self.resume_button, 1, 2)
        grid.addWidget(self.cancel_button, 1, 3)
        grid.addWidget(self.status, 2, 0, 1, 4)
        grid.setColumnStretch(0, 1)
        self._update_buttons()

    def apply_progress(self, event: Progress) -> None:
        self.done_bytes, self.total = event.done, event.total or self.total
        self._set_bar()
        if self.state == "running":
            self.status.setText(
                f"{human_size(event.done)} of {human_size(event.total)} · {human_size(event.speed_bps)}/s · "
                f"ETA {human_eta(event.eta_s)}"
            )

    def apply_state(self, event: StateChanged) -> None:
        self.state = event.state
        word = _STATE_WORDS.get(event.state, event.state)
        if event.state == "done":
            self.done_bytes = self.total
            self._set_bar()
            self.status.setText(f"done · {human_size(self.total)}" + (f" · {event.snapshot_dir}"
                                                                        if event.snapshot_dir else ""))
        elif event.state == "failed":
            self.error_text = event.error.message if event.error else "failed"
            self.status.setText(f"failed: {self.error_text}")
            set_tone(self.status, "error")
        elif event.state == "paused":
            self.status.setText(f"paused at {human_size(self.done_bytes)} of {human_size(self.total)}")
        else:
            set_tone(self.status, None)
            self.status.setText(word)
        self._update_buttons()

    def _set_bar(self) -> None:
        self.bar.setValue(int(_PERMILLE * self.done_bytes / self.total) if self.total else 0)
        self.bar.setFormat(f"%p%  ({human_size(self.done_bytes)} / {human_size(self.total)})")

    def _update_buttons(self) -> None:
        s = self.state
        self.pause_button.setEnabled(s in ("queued", "running"))
        # A failed download resumes from its partial file, like a paused one.
        self.resume_button.setEnabled(s in ("paused", "failed"))
        self.cancel_button.setEnabled(s in ("queued", "running", "paused", "failed"))


class DownloadsPanel(QWidget):
    """Every download of this session, newest first, and those a previous session left unfinished.

    Args:
        bridge: the downloads, seen from Qt.
        parent: the Qt parent.

    Signals:
        resume_interrupted(object): the user asked to continue these `DownloadRequest`s (a list).
    """

    resume_interrupted = Signal(object)

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None):
        super().__init__(parent)
        self.bridge = bridge
        self.rows: dict[int, DownloadRow] = {}
        self.interrupted: list[DownloadRequest] = []
        self.empty = QLabel("No downloads yet. Pick a file on the repo page and press Download.")
        self.interrupted_label = QLabel(wordWrap=True)
        self.resume_all_button = QPushButton("Resume them")
        self.resume_all_button.clicked.connect(self._resume_all)
        notice = QHBoxLayout()
        notice.addWidget(self.interrupted_label, 1)
        notice.addWidget(self.resume_all_button)
        self.interrupted_label.hide()
        self.resume_all_button.hide()
        inner = QWidget()
        self._list = QVBoxLayout(inner)
        self._list.addWidget(self.empty)
        self._list.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        outer = QVBoxLayout(self)
        outer.addLayout(notice)
        outer.addWidget(scroll, 1)
        bridge.started.connect(self._on_started)
        bridge.progress.connect(self._on_progress)
        bridge.state_changed.connect(self._on_state)

    def row(self, download_id: int) -> DownloadRow:
        return self.rows[download_id]

    def show_interrupted(self, requests: list[DownloadRequest]) -> None:
        """Offer to continue downloads that a previous session left unfinished (partial files kept)."""
        self.interrupted = list(requests)
        if not requests:
            self.interrupted_label.hide()
            self.resume_all_button.hide()
            return
        names = ", ".join(f"{r.repo_id} ({r.files[0].path_in_repo})" for r in requests[:3])
        more = f" and {len(requests) - 3} more" if len(requests) > 3 else ""
        self.interrupted_label.setText(f"{len(requests)} download(s) did not finish last time: {names}{more}. "
                                       "They continue from where they stopped.")
        self.interrupted_label.show()
        self.resume_all_button.show()

    @Slot()
    def _resume_all(self) -> None:
        requests, self.interrupted = self.interrupted, []
        self.show_interrupted([])
        self.resume_interrupted.emit(requests)

    @Slot(object)
    def _on_started(self, item: Download) -> None:
        self.empty.hide()
        row = DownloadRow(item, self.bridge, self)
        self.rows[item.id] = row
        self._list.insertWidget(0, row)

    @Slot(object)
    def _on_progress(self, event: Progress) -> None:
        row = self.rows.get(event.download_id)
        if row is not None:
            row.apply_progress(event)

    @Slot(object)
    def _on_state(self, event: StateChanged) -> None:
        row = self.rows.get(event.download_id)
        if row is not None:
            row.apply_state(event)

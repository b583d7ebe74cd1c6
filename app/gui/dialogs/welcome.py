"""The welcome shown on the first start (and from Help → Welcome…): this machine, the built-in model,
a recommended download, and where models and chats are kept.

Non-modal; the hardware is detected on a pool thread, so the window never waits for NVML.
"""

from __future__ import annotations

import html
import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import QDialog, QGroupBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.gui.common.engine_availability import awq_status_text
from app.gui.common.jobs import Jobs
from app.services.paths import AppPaths
from app.services.planning.machine import detect_machine
from app.services.planning.profile_text import format_profile
from app.services.planning.starter_picks import Pick, recommend
from engine.torch_available import EngineStatus, awq_engine_status
from models.hardware.profile import GIB, HardwareProfile
from models.hub.cache import hub_cache_dir

SEEN_KEY = "first_run/seen"
# A small embedding model for documents' search by meaning: BGE small (English, 384 dimensions) as GGUF, Q8_0
# about 35 MB; any GGUF embedding model of the library is used the same way.
EMBEDDING_SUGGESTION = "CompendiumLabs/bge-small-en-v1.5-gguf"


def maybe_show_first_run(settings: QSettings, show_welcome: Callable[[], FirstRunDialog]) -> FirstRunDialog | None:
    """Open the welcome (`show_welcome`: the window's Help → Welcome…) if `settings` says it was never shown,
    and remember that it was."""
    if settings.value(SEEN_KEY, False, type=bool):
        return None
    settings.setValue(SEEN_KEY, True)
    settings.sync()
    return show_welcome()


def storage_text(cache_dir: Path | None = None, chat_db: Path | None = None) -> str:
    """Where models and chats are kept, and the free space where models go."""
    cache_dir = cache_dir or hub_cache_dir()
    chat_db = chat_db or AppPaths.default().chat_db
    existing = next((p for p in (cache_dir, *cache_dir.parents) if p.exists()), None)
    try:
        free = f"{shutil.disk_usage(existing).free / GIB:.1f} GiB free there" if existing else "free space unknown"
    except OSError:
        free = "free space unknown"
    return (f"Models are kept in the Hugging Face cache, {cache_dir} ({free}), so other tools see them too.\n"
            f"Chats are saved in {chat_db}.")


class FirstRunDialog(QDialog):
    """The welcome.

    Args:
        parent: the main window.
        detect: reads the hardware (on a pool thread); default: `detect_machine`.
        awq_status: whether the PyTorch (AWQ) engine can run; default: `awq_engine_status()`.

    Signals:
        detected(object): the `HardwareProfile`, once read (on the GUI thread).
        chat_requested(): "Chat now" was pressed (the dialog has closed).
        model_requested(str): "Show this model" was pressed, with the repo id.
    """

    detected = Signal(object)
    chat_requested = Signal()
    model_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None,
                 detect: Callable[[], HardwareProfile] = detect_machine, awq_status: EngineStatus | None = None):
        super().__init__(parent)
        self.setWindowTitle("Welcome to Tailor")
        self.setModal(False)
        # Wrapped labels get their height from the width: give them room to lay out in.
        self.setMinimumWidth(640)
        self.pick: Pick | None = None
        self.hardware_label = _label("Looking at this machine…")
        self.engines_label = _label(awq_status_text(awq_status or awq_engine_status()))
        self.chat_button = QPushButton("Chat now with the built-in model")
        self.chat_button.setDefault(True)
        self.pick_label = _label("Choosing a model for this machine…")
        self.show_button = QPushButton("Show this model")
        self.show_button.setEnabled(False)
        self.storage_label = _label(storage_text())
        close_button = QPushButton("Close")
        layout = QVBoxLayout(self)
        layout.addWidget(_group("This machine", self.hardware_label, self.engines_label))
        layout.addWidget(_group("Start chatting", _label(
            "SmolLM2-135M comes with Tailor: small, offline, and already loaded. Good for a first try; "
            "a larger model answers much better."), self.chat_button))
        layout.addWidget(_group("Recommended download", self.pick_label, self.show_button))
        self.embedding_button = QPushButton("Show an embedding model (bge-small, about 35 MB)")
        self.embedding_button.setToolTip(EMBEDDING_SUGGESTION)
        layout.addWidget(_group("Chat with your files", _label(
            "Attach files to a message (Ctrl+Shift+A), or let a chat answer from a folder (Knowledge, "
            "Ctrl+Shift+K). An embedding model finds passages by meaning as well as by words:"),
            self.embedding_button))
        layout.addWidget(_group("Where things are kept", self.storage_label))
        layout.addStretch(1)  # spare height goes below the groups, not into blank lines inside them
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(close_button)
        layout.addLayout(row)
        self.chat_button.clicked.connect(self._chat)
        self.show_button.clicked.connect(self._show_pick)
        self.embedding_button.clicked.connect(lambda: self._show_repo(EMBEDDING_SUGGESTION))
        close_button.clicked.connect(self.close)
        self.jobs = Jobs(self, max_threads=1)
        self.jobs.run(detect, self._on_profile, self._on_failure)

    def hardware_text(self) -> str:
        return self.hardware_label.text()

    @Slot(object)
    def _on_profile(self, profile: HardwareProfile) -> None:
        self.hardware_label.setText(format_profile(profile))
        self.pick = recommend(profile)
        self.pick_label.setTextFormat(Qt.TextFormat.RichText)
        self.pick_label.setText(f"<b>{self.pick.name}</b> ({self.pick.repo_id}, about "
                                f"{self.pick.q4_k_m_gb:.1f} GB at Q4_K_M)<br>{html.escape(self.pick.reason)}<br>"
                                "The Models window then picks the exact file for this machine and says why.")
        self.show_button.setEnabled(True)
        self._fit_height()  # the texts grew: let the dialog grow with them
        self.detected.emit(profile)

    def _fit_height(self) -> None:
        # adjustSize() sizes wrapped labels for a narrower width and leaves blank lines: ask the layout
        # how tall it is at the dialog's real width instead.
        width = max(self.width(), self.minimumWidth())
        layout = self.layout()
        layout.invalidate()  # the labels' cached heights are from before their new texts
        self.resize(width, max(self.height(), layout.totalHeightForWidth(width)))

    @Slot(object)
    def _on_failure(self, exc: BaseException) -> None:  # detect_hardware never raises; an injected one may
        self.hardware_label.setText(f"Could not read this machine's hardware: {exc}")
        self.pick_label.setText("Open the Models window (Ctrl+M) to search for a model.")

    @Slot()
    def _chat(self) -> None:
        self.close()
        self.chat_requested.emit()

    @Slot()
    def _show_pick(self) -> None:
        if self.pick is not None:
            self._show_repo(self.pick.repo_id)

    def _show_repo(self, repo_id: str) -> None:
        self.model_requested.emit(repo_id)


def _label(text: str) -> QLabel:
    label = QLabel(text, wordWrap=True, textFormat=Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _group(title: str, *widgets: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    column = QVBoxLayout(box)
    for widget in widgets:
        column.addWidget(widget)
    return box

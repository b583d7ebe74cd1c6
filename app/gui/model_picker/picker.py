"""ModelPicker: the model bar at the top of the chat: the model loaded (its quant, where it runs), a
drop-down of the models on disk with each one's verdict for this machine, and while a model loads, a
progress bar with Cancel.

The list and the verdicts read the library's folders and every file's header, so they are made on a
pool thread (app/gui/common/jobs.py) when the window asks (`refresh_models`), after each load and when the
drop-down opens; the drop-down shows the last list meanwhile. The window puts the picker at the top of the
chat; Open model… and Open model folder… of its Chat menu pick through the picker too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.chat.load_settings import load_settings_of
from app.chat.model_state import file_name
from app.gui.chat_controller import ChatController
from app.gui.common.jobs import Jobs
from app.gui.model_picker.picker_list import (
    STAGE_TIPS,
    Choice,
    choices,
    loaded_line,
    models_on_disk,
    progress_text,
)
from app.services.history.store import ChatSettings
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.plan_cache import PlanCache
from engine.protocol import Loaded, ModelInfo
from engine.starter import StarterModelMissing, starter_model_path
from models.library import ModelStore
from models.plan.decision_tree import Plan

MORE = "more"  # the item data of "Get more models…"
STEPS = 1000  # the progress bar's range: a tenth of a percent


class _Combo(QComboBox):
    """A combo box that says when its drop-down is about to open (the list is read again then)."""

    opening = Signal()

    def showPopup(self) -> None:  # noqa: N802 (Qt override)
        self.opening.emit()
        super().showPopup()


class _ElidedLabel(QLabel):
    """A one-line label that shortens its text with "…" to the width it gets, never cut off by the layout;
    `full_text` is the whole line."""

    def __init__(self) -> None:
        super().__init__()
        self.full_text = ""

    def set_full_text(self, text: str) -> None:
        if text == self.full_text:
            return
        self.full_text = text
        self.updateGeometry()
        self._elide()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override): the whole text, when there is room
        return QSize(self.fontMetrics().horizontalAdvance(self.full_text) + 4, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(min(self.sizeHint().width(), self.fontMetrics().averageCharWidth() * 12),
                     super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideMiddle, self.width()))


class ModelPicker(QWidget):
    """The loaded model, the models on disk to switch to, and a load's progress with Cancel.

    It follows the chat (what loads, its progress, what loaded) and asks its session to load the model
    picked (refused with a notice while a reply is written) or to cancel a load.

    Args:
        chat: the chat controller (its session: what is loaded or loading, its plan, planner and open chat).
        store: the model library (the Models window's).
        parent: the Qt parent.

    Signals:
        model_picked(str): the user chose this model on disk (a GGUF file or a model folder): it loads.
        more_requested(): the user chose "Get more models…".
        cancel_requested(): the user pressed Cancel while a model loads: the load is cancelled.
        choices_ready(): the list of models and their verdicts was read again.
    """

    model_picked = Signal(str)
    more_requested = Signal()
    cancel_requested = Signal()
    choices_ready = Signal()

    def __init__(self, chat: ChatController, store: ModelStore, parent: QWidget | None = None):
        super().__init__(parent)
        session = chat.session
        self.session, self.store = session, store
        self.jobs = Jobs(self, max_threads=1)
        self.choices: list[Choice] = []
        self.plans = PlanCache()  # each model's plan, made once per file and settings (read on the pool thread)
        self._info: ModelInfo | None = None  # of the model loaded last
        self._plan: Plan | None = session.plan
        self._status = ""  # the session's model line, shown while nothing is loaded
        self._listing = self._list_again = False
        self.current = _ElidedLabel()
        self.current.setAccessibleName("Model loaded")
        self.combo = _Combo()
        self.combo.setAccessibleName("Switch model")
        self.combo.setPlaceholderText("Switch model…")
        # Narrow in the row (the chat's top keeps room for the progress); the list itself opens as wide as it needs.
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(16)
        self.progress = QProgressBar()
        self.progress.setRange(0, STEPS)
        self.progress.setMinimumWidth(160)
        self.progress.setAccessibleName("Model load progress")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAccessibleName("Cancel loading the model")
        self.cancel_button.setToolTip("Stop loading this model and go back to the one loaded before")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.current)
        layout.addWidget(self.combo)
        layout.addWidget(self.progress, 1)
        layout.addWidget(self.cancel_button)
        layout.addStretch(0)
        self.combo.activated.connect(self._picked)
        self.combo.opening.connect(self.refresh_models)
        self.cancel_button.clicked.connect(self._cancel)
        self._fill()
        self.refresh_state()
        chat.planned.connect(self.show_plan)
        chat.load_progress.connect(self.show_progress)
        chat.loaded.connect(self.show_loaded)
        chat.model_changed.connect(self.show_status)
        chat.unloaded.connect(self.refresh_state)
        self.model_picked.connect(session.load_model)
        self.cancel_requested.connect(session.cancel_load)

    # ------------------------------------------------------------ what the session says (slots)

    @Slot(object)
    def show_plan(self, plan: Plan | None) -> None:
        """A load starts with this plan: the progress starts again, Cancel applies to it."""
        self._plan = plan
        self.show_progress(0.0, "reading")
        self.cancel_button.setEnabled(True)
        self.refresh_state()

    @Slot(float, str)
    def show_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(round(min(1.0, max(0.0, fraction)) * STEPS))
        self.progress.setFormat(progress_text(fraction, stage))
        self.progress.setToolTip(STAGE_TIPS.get(stage, stage))  # the bar shows while the session loads

    @Slot(object)
    def show_loaded(self, event: Loaded) -> None:
        self._info = event.info
        self.refresh_state()
        self.refresh_models()  # the verdicts are at the open chat's settings, which the load may follow

    @Slot(str)
    def show_status(self, text: str) -> None:
        """The session's model line (loading, loaded, failed, cancelled): shown while nothing is loaded."""
        self._status = text
        self.refresh_state()

    @Slot()
    def refresh_state(self) -> None:
        """Show what the session has now: the progress while it loads, else the model loaded (or why none)."""
        model = self.session.model
        loading = model.loading is not None
        self.progress.setVisible(loading)
        self.cancel_button.setVisible(loading)
        if loading:
            self.current.set_full_text(f"Loading {file_name(model.loading[0])} …")
        elif model.loaded is not None:
            info = self._info if self._info is not None and self._info.path == model.loaded[0] else None
            self.current.set_full_text(loaded_line(model.loaded[0], info, self._plan))
        else:
            self.current.set_full_text(self._status or "No model loaded")
        reasons = "\n".join(self._plan.reasons) if self._plan is not None and not loading else ""
        notice = self._info.notice if self._info is not None and self._info.notice and not loading else ""
        self.current.setToolTip("\n\n".join(t for t in (self.current.full_text, notice, reasons) if t))

    # ------------------------------------------------------------ the list of models

    @Slot()
    def refresh_models(self) -> None:
        """Read the library again, on a pool thread (one listing at a time), with each model's verdict:
        planned once per file and settings (self.plans), again when the library or the machine changed."""
        if self._listing:
            self._list_again = True
            return
        self._listing = True
        store, planner, plans = self.store, self.session.model.planner, self.plans
        chat = replace(self.session.current.settings) if self.session.current else ChatSettings()
        extra = (_starter(), self.session.model_path)

        def listing() -> list[Choice]:
            models = models_on_disk(store, extra)
            # Verdicts are for this machine: a remote server's stand-in planner plans nothing here.
            if not isinstance(planner, LoadPlanner):
                return choices(models, None)
            plans.begin(planner, (m.path for m in models))
            return choices(models, lambda path: plans.plan(path, load_settings_of(chat, (), path)))

        self.jobs.run(listing, self._listed, self._not_listed)

    @property
    def listing(self) -> bool:
        """Whether the list is being read (or will be again, for a refresh asked for meanwhile)."""
        return self._listing or self._list_again

    def _listed(self, found: list[Choice]) -> None:
        if found != self.choices:  # the same list leaves an open drop-down as it is
            self.choices = found
            self._fill()
        self._listed_done()

    def _not_listed(self, exc: BaseException) -> None:
        self.combo.setToolTip(f"Cannot read the model folder: {exc}")
        self._listed_done()

    def _listed_done(self) -> None:
        self._listing = False
        self.choices_ready.emit()
        if self._list_again:
            self._list_again = False
            self.refresh_models()

    def _fill(self) -> None:
        """The drop-down: each model with its verdict, then "Get more models…"; nothing chosen (the placeholder)."""
        self.combo.blockSignals(True)
        self.combo.clear()
        for choice in self.choices:
            self.combo.addItem(choice.text, choice.model.path)
            self.combo.setItemData(self.combo.count() - 1, choice.model.path, Qt.ItemDataRole.ToolTipRole)
        if self.choices:
            self.combo.insertSeparator(self.combo.count())
        self.combo.addItem("Get more models…", MORE)
        self.combo.setCurrentIndex(-1)
        self.combo.view().setMinimumWidth(self.combo.view().sizeHintForColumn(0) + 24)  # + a scroll bar
        self.combo.blockSignals(False)

    def items(self) -> list[tuple[str, Any]]:
        """(text, data) of each entry of the drop-down, separators left out."""
        return [(self.combo.itemText(i), self.combo.itemData(i)) for i in range(self.combo.count())
                if self.combo.itemText(i)]

    def pick(self, data: str) -> None:
        """Choose the entry with this data, as a click in the drop-down does."""
        self._picked(self.combo.findData(data))

    @Slot(int)
    def _picked(self, index: int) -> None:
        data = self.combo.itemData(index) if index >= 0 else None
        self.combo.setCurrentIndex(-1)  # the drop-down offers; the line beside it says what is loaded
        if data == MORE:
            self.more_requested.emit()
        elif data:
            self.model_picked.emit(str(data))

    @Slot()
    def choose_file(self) -> None:
        """Open model…: a GGUF file, chosen in a file dialog."""
        path, _ = QFileDialog.getOpenFileName(
            self.window(), "Open a GGUF model", "", "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.model_picked.emit(path)

    @Slot()
    def choose_folder(self) -> None:
        """Open model folder…: a Hugging Face model folder (safetensors, dense or AWQ): the PyTorch engine runs it."""
        path = QFileDialog.getExistingDirectory(self.window(), "Open a model folder (config.json, *.safetensors)")
        if path:
            self.model_picked.emit(path)

    @Slot()
    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)  # once: the next load (the way back) enables it again
        self.cancel_requested.emit()


def _starter() -> str:
    """The built-in model's file, offered beside the library; "" in a build without it."""
    try:
        return str(starter_model_path())
    except StarterModelMissing:
        return ""

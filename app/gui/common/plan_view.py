"""How the window shows the plan a model was loaded with: a status bar line, the side panel's Model plan
tab, and a dialog (for windows that have no such tab)."""

from __future__ import annotations

from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from app.gui.common.status_labels import FittingLabel
from app.services.planning.plan_text import format_plan
from models.plan.decision_tree import Plan

GIB = 1024**3


def plan_summary(plan: Plan | None) -> str:
    """One line for the status bar, e.g. "CPU · KV f16 · forecast 0.30 GiB · fits up to 8,192 tokens"."""
    if plan is None:
        return ""
    if plan.n_gpu_layers > plan.n_layers:
        where = "all on GPU"
    elif plan.n_gpu_layers:
        where = f"{plan.n_gpu_layers}/{plan.n_layers} layers on GPU"
    else:
        where = "CPU (GPU unused)" if plan.gpu_unused_reason else "CPU"
    total = plan.forecast.total("total_bytes") if plan.forecast else 0
    if not plan.fits:
        fits = " · may not fit"
    else:
        fits = f" · fits up to {plan.max_context:,} tokens" if plan.max_context else ""
    return f"{where} · KV {plan.kv_type} · forecast {total / GIB:.2f} GiB{fits}"


def fit_text(plan: Plan) -> str:
    """A file's verdict with the largest context that fits, e.g. "fits fully on GPU up to 28,672 tokens"."""
    if not plan.fits:
        return "too large"
    most = f"up to {plan.max_context:,} tokens" if plan.max_context else ""
    if plan.n_gpu_layers > plan.n_layers:
        return f"fits fully on GPU {most}".rstrip()
    if plan.n_gpu_layers == 0:
        return f"CPU · fits in RAM {most}".rstrip()
    return f"partial offload: {plan.n_gpu_layers}/{plan.n_layers} layers" + (f", {most}" if most else "")


NO_PLAN = "No plan yet: the model's header could not be read, or nothing is loaded."


class PlanLabel(FittingLabel):
    """The status bar's plan line, shortened to fit; its tooltip holds the reasons, then the whole line."""

    DETAIL_FIRST = True  # why, first: the line itself is on the bar

    def show_plan(self, plan: Plan | None) -> None:
        self.set_detail("\n".join(plan.reasons) if plan else "")
        self.setText(plan_summary(plan))


class PlanPage(QWidget):
    """The side panel's Model plan tab: the summary line, then the whole plan and why, wrapped to the panel.

    The plan is plain text with paths and per-device figures in it; a read-only text box wraps it at
    words (or anywhere, for a path longer than the panel), where a label would widen the panel.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("planPage")
        self.summary = QLabel(NO_PLAN, wordWrap=True)
        self.details = QPlainTextEdit(readOnly=True)
        self.details.setAccessibleName("Model plan")
        self.details.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.details.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.details, 1)
        self.plan: Plan | None = None

    def show_plan(self, plan: Plan | None) -> None:
        self.plan = plan
        self.summary.setText(plan_summary(plan) if plan else NO_PLAN)
        self.details.setPlainText(format_plan(plan) if plan else "")

    def text(self) -> str:
        """Everything the tab says (the summary, then the plan)."""
        return f"{self.summary.text()}\n{self.details.toPlainText()}".strip()

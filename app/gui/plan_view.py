"""How the window shows the plan a model was loaded with: a status bar line and a dialog."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from app.plan_command import format_plan
from models.plan import Plan

GIB = 1024**3


def plan_summary(plan: Plan | None) -> str:
    """One line for the status bar, e.g. "CPU · KV f16 · forecast 0.30 GiB"."""
    if plan is None:
        return ""
    if plan.n_gpu_layers > plan.n_layers:
        where = "all on GPU"
    elif plan.n_gpu_layers:
        where = f"{plan.n_gpu_layers}/{plan.n_layers} layers on GPU"
    else:
        where = "CPU (GPU unused)" if plan.gpu_unused_reason else "CPU"
    total = plan.forecast.total("total_bytes") if plan.forecast else 0
    fits = "" if plan.fits else " · may not fit"
    return f"{where} · KV {plan.kv_type} · forecast {total / GIB:.2f} GiB{fits}"


class PlanLabel(QLabel):
    """The status bar's plan line; its tooltip holds the reasons."""

    def show_plan(self, plan: Plan | None) -> None:
        self.setText(plan_summary(plan))
        self.setToolTip("\n".join(plan.reasons) if plan else "")


def open_plan_dialog(parent: QWidget, plan: Plan | None) -> QMessageBox:
    """A non-modal box with the whole plan and why; returned so tests can read and close it."""
    text = format_plan(plan) if plan else "No plan yet: the model's header could not be read, or nothing is loaded."
    box = QMessageBox(QMessageBox.Icon.Information, "Model plan", "How this model runs here, and why", parent=parent)
    box.setDetailedText(text)
    box.setInformativeText(text)
    box.open()
    return box

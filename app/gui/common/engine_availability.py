"""Where a model format is chosen, say which engines cannot run here and why."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from engine.torch_available import EngineStatus

# The formats the PyTorch engine runs, as a format chooser holds them (data, label).
TORCH_FORMATS = (("awq", "AWQ"), ("gptq", "GPTQ"), ("fp8", "FP8"))


def awq_status_text(status: EngineStatus) -> str:
    """One line for the welcome: the engines this machine can run."""
    if status.available:
        return "Engines: GGUF (llama.cpp) and AWQ, GPTQ, FP8 (PyTorch)."
    return f"Engines: GGUF (llama.cpp). AWQ, GPTQ and FP8 are unavailable: {status.reason}."


def mark_torch_choices(combo: QComboBox, status: EngineStatus) -> None:
    """Label each PyTorch format of a chooser as unavailable, with the reason, where PyTorch cannot run."""
    for data, label in TORCH_FORMATS:
        _mark_choice(combo, status, data, label)


def _mark_choice(combo: QComboBox, status: EngineStatus, data: str, label: str) -> None:
    """Label a PyTorch format's entry of a chooser as unavailable, with the reason (still
    selectable to browse)."""
    index = combo.findData(data)
    if status.available or index < 0:
        return
    combo.setItemText(index, f"{label} (unavailable: {status.reason})")
    combo.setItemData(
        index,
        f"{label} models run on the PyTorch engine, which cannot run here: {status.reason}. "
        "You can still browse them; Tailor plans GGUF files instead.",
        Qt.ItemDataRole.ToolTipRole,
    )

"""Where a model format is chosen, say which engines cannot run here and why."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from engine.torch_available import EngineStatus


def awq_status_text(status: EngineStatus) -> str:
    """One line for the welcome: the engines this machine can run."""
    if status.available:
        return "Engines: GGUF (llama.cpp) and AWQ (PyTorch)."
    return f"Engines: GGUF (llama.cpp). AWQ is unavailable: {status.reason}."


def mark_awq_choice(combo: QComboBox, status: EngineStatus, data: str = "awq") -> None:
    """Label the AWQ entry of a format chooser as unavailable, with the reason (still selectable to browse)."""
    index = combo.findData(data)
    if status.available or index < 0:
        return
    combo.setItemText(index, f"AWQ (unavailable: {status.reason})")
    combo.setItemData(
        index,
        f"AWQ models run on the PyTorch engine, which cannot run here: {status.reason}. "
        "You can still browse them; Tailor plans GGUF files instead.",
        Qt.ItemDataRole.ToolTipRole,
    )

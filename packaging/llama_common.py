"""What the llama.cpp build's modules share: where the build puts its files, its error, and pip."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "build" / "wheels"
CUDA_WORK = ROOT / "build" / "cuda"


class BuildError(Exception):
    """A step that cannot go on, with what to do about it."""


def run_pip(python: str, *args: str) -> None:
    cmd = [python, "-m", "pip", *args]
    print("+", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def pip_target(python: str, target: Path, packages: list[str]) -> Path:
    stamp = target / ".installed"
    if not (stamp.exists() and stamp.read_text() == " ".join(packages)):
        shutil.rmtree(target, ignore_errors=True)
        run_pip(python, "install", "--quiet", "--no-deps", "--target", str(target), *packages)
        stamp.write_text(" ".join(packages))
    return target


"""What to build: the pinned llama-cpp-python, the CUDA architectures, and the folder its wheel goes to."""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path

from llama_common import ROOT, WHEELS, BuildError
from llama_gpus import Machine

# RTX 20, A100, RTX 30, RTX 40, H100/H200, RTX 50: what `make package` builds for.
ALL_ARCHS = ("75", "80", "86", "89", "90", "120")
CPU_DEFAULT_ARGS = "-DGGML_NATIVE=OFF"


def llama_requirement() -> str:
    """The pinned llama-cpp-python of pyproject.toml (one place for the version)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project.get("optional-dependencies", {}).get("gguf", []):
        if re.match(r"llama[-_]cpp[-_]python\s*==", req):
            return req.replace(" ", "")
    raise BuildError("pyproject.toml's gguf extra pins no llama-cpp-python==VERSION")


def user_cmake_args() -> str:
    """CMAKE_ARGS given by the user beyond the Makefile's default (they make a wheel of their own)."""
    args = os.environ.get("CMAKE_ARGS", "").strip()
    return "" if args in ("", CPU_DEFAULT_ARGS) else args


def parse_archs(text: str) -> tuple[str, ...]:
    archs = tuple(a for a in re.split(r"[,; ]+", text.strip()) if a)
    bad = [a for a in archs if not re.fullmatch(r"\d{2,3}[af]?", a)]
    if not archs or bad:
        raise BuildError(f"CUDA architectures must look like 86 or 75,89 (got {text!r})")
    return tuple(sorted(set(archs), key=lambda a: int(re.sub(r"\D", "", a))))


def choose_archs(machine: Machine, given: str | None, all_archs: bool) -> tuple[str, ...]:
    if given:
        return parse_archs(given)
    if all_archs:
        return ALL_ARCHS
    if machine.gpus:
        return parse_archs(",".join(g.arch for g in machine.gpus))
    raise BuildError(
        "no NVIDIA GPU was found to build for: name the architecture, e.g. CUDA_ARCHS=89 "
        f"(75 RTX 20, 80 A100, 86 RTX 30, 89 RTX 40, 90 H100, 120 RTX 50); make package builds {','.join(ALL_ARCHS)}"
    )


def wheel_dir(variant: str, cuda_version: str | None = None, archs: tuple[str, ...] = ()) -> Path:
    name = "cpu" if variant == "cpu" else f"cuda{cuda_version.split('.')[0]}-{'-'.join(archs)}"
    extra = user_cmake_args()
    if extra:
        name += "-" + hashlib.sha256(extra.encode()).hexdigest()[:8]
    return WHEELS / name


"""Installing the chosen build into a venv, and remembering the choice (`make cpu` / `make gpu`)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from llama_common import ROOT, BuildError, run_pip
from llama_cuda import pick_toolkit_version, prepare_toolkit, runtime_packages
from llama_gpus import Machine, detect
from llama_plan import choose_archs, wheel_dir
from llama_wheels import build_cpu_wheel, build_cuda_wheel, find_wheel

MARKER = ".llama-build.json"


def _marker(venv: Path) -> dict:
    try:
        return json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install(venv: Path, variant: str, archs_text: str | None, all_archs: bool, probe: str,
            cuda_major: int | None = None) -> None:
    python = str(venv / "bin" / "python")
    marker = _marker(venv)
    chosen = variant
    if variant == "auto":
        # `make cpu` / `make gpu` are remembered: a later `make run` keeps what was chosen.
        chosen = marker.get("choice") or "auto"
    machine = detect(probe)
    if chosen == "auto":
        chosen = "cuda" if machine.gpus else "cpu"
        if machine.gpus:
            print(f"NVIDIA driver found ({', '.join(g.name for g in machine.gpus)}): building llama.cpp with CUDA")
    wheel = None
    if chosen == "cuda":
        try:
            wheel = _install_cuda(python, venv, machine, archs_text, all_archs, cuda_major)
        except (BuildError, subprocess.CalledProcessError) as exc:
            if variant == "cuda":
                raise
            # `make run` / `make test` must not stop at a CUDA problem: the CPU build works everywhere.
            print(f"llama_build: {exc}\nllama_build: going on with the CPU build (make gpu retries)", file=sys.stderr)
            chosen = "cpu"
    if wheel is None:
        wheel = build_cpu_wheel(python)
    digest = _sha256(wheel)
    if marker.get("sha256") != digest or not _installed(venv):
        run_pip(python, "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel))
    record = {"variant": chosen, "wheel": str(wheel), "sha256": digest}
    if variant != "auto":
        record["choice"] = variant
    elif marker.get("choice"):
        record["choice"] = marker["choice"]
    (venv / MARKER).write_text(json.dumps(record, indent=2) + "\n")
    print(f"llama-cpp-python: {chosen} build installed from {wheel.relative_to(ROOT)}")


def _install_cuda(python: str, venv: Path, machine: Machine, archs_text: str | None, all_archs: bool,
                  cuda_major: int | None) -> Path:
    archs = choose_archs(machine, archs_text or os.environ.get("CUDA_ARCHS"), all_archs)
    version, system_top = pick_toolkit_version(machine, archs, cuda_major)
    wheel = find_wheel(wheel_dir("cuda", version, archs))  # built before: no toolchain needed
    if wheel is None:
        wheel = build_cuda_wheel(python, prepare_toolkit(python, version, system_top), archs)
    _ensure_cuda_runtime(python, venv, version)
    return wheel


def _ensure_cuda_runtime(python: str, venv: Path, version: str) -> None:
    """The CUDA runtime and cuBLAS in the venv, where libggml-cuda.so's RPATH looks (the system's own
    copies are not always on the loader's path). Already there (torch brings them): nothing fetched."""
    major = version.split(".")[0]
    for site in venv.glob("lib/python*/site-packages/nvidia"):
        libs = {p.name for p in site.glob("*/lib/lib*.so*")}
        if {f"libcudart.so.{major}", f"libcublas.so.{major}", f"libcublasLt.so.{major}"} <= libs:
            return
    run_pip(python, "install", "--quiet", *runtime_packages(version))


def _installed(venv: Path) -> bool:
    return any(venv.glob("lib/python*/site-packages/llama_cpp/lib"))


"""Build and install llama-cpp-python for this machine: with CUDA where an NVIDIA driver is, else for the CPU.

The Makefile runs this with the venv's Python before it installs Tailor; it uses only the standard library
(and `pip`), so it works before anything else is installed.

    python packaging/llama_build.py detect                  # the GPUs found and what would be built
    python packaging/llama_build.py cmake-args [--variant cuda] [--archs 89]
    python packaging/llama_build.py install --venv .venv [--variant auto|cpu|cuda] [--archs 89 | --all-archs]
    python packaging/llama_build.py wheel --variant cuda --cuda 13 --archs 90   # build only (make gpu-wheel)

Wheels are built into build/wheels/<variant>/ and installed from there. pip's own wheel cache cannot tell
builds apart (its key ignores CMAKE_ARGS), so CUDA wheels never enter it (--no-cache-dir); the CPU wheel
comes through it as before, which is what lets CI and `make test` reuse it.

The CUDA build (see packaging/README.md):
- loads ggml's backends at run time (GGML_BACKEND_DL): libggml-cuda.so is only dlopen'ed, so where the
  driver or a GPU is missing the same wheel runs on its CPU backend (engine/gguf/ggml_libraries.py loads them);
- one portable CPU backend (GGML_NATIVE=OFF, no GGML_CPU_ALL_VARIANTS: the AMX variant it would pick on
  some virtual machines dies with SIGILL);
- unversioned library names and everything installed into llama_cpp/lib, so each library exists once
  (with versioned names, llama_cpp's own `libggml.so` and libllama's `libggml.so.0` are two copies with
  two backend registries);
- links ggml-cuda against a libcuda stub generated from the toolkit's cuda.h (the driver itself supplies
  the symbols at run time), so ggml keeps its virtual-memory pool (GGML_CUDA_NO_VMM stays off);
- finds cuBLAS and the CUDA runtime in the nvidia-* PyPI packages of the same venv (RPATH), or the system.

This file is the command line; the modules beside it do the work: llama_gpus.py (the driver's GPUs),
llama_plan.py (the pin, the architectures, the wheel folders), llama_cuda.py (the CUDA toolchain and its
CMAKE_ARGS), llama_wheels.py (building and repacking wheels), llama_install.py (into a venv) and
llama_common.py (paths, BuildError, pip).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

# Run as a file, Python puts packaging/ first on sys.path; loaded from its path instead (the tests do:
# `packaging` is also the name of PyPA's library), it may not be there. The modules beside this one are
# imported by their own names, so packaging/ goes first on sys.path in both cases.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from llama_common import BuildError  # noqa: E402
from llama_cuda import (  # noqa: E402
    Toolkit,
    cuda_cmake_args,
    pick_toolkit_version,
    prepare_toolkit,
    system_toolkit,
    toolkit_work,
    write_cuda_stub,
)
from llama_gpus import detect  # noqa: E402
from llama_install import install  # noqa: E402
from llama_plan import ALL_ARCHS, CPU_DEFAULT_ARGS, choose_archs, llama_requirement, wheel_dir  # noqa: E402
from llama_wheels import CUDA_RPATH, build_cpu_wheel, build_cuda_wheel, find_wheel, repack_cuda_wheel  # noqa: E402

# What the tests use of the modules beside this one, besides the command line.
__all__ = ["CUDA_RPATH", "llama_requirement", "main", "repack_cuda_wheel", "wheel_dir", "write_cuda_stub"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe", choices=("auto", "nvml", "nvidia-smi", "none"), default="auto",
                        help="how to look for an NVIDIA driver (none: behave as on a machine without one)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("detect", help="the NVIDIA GPUs found and what would be built")
    for name in ("cmake-args", "install", "wheel"):
        p = sub.add_parser(name)
        p.add_argument("--variant", choices=("auto", "cpu", "cuda"), default="auto")
        p.add_argument("--archs", help="CUDA architectures, e.g. 89 or 75,86 (default: $CUDA_ARCHS, else the GPUs found)")
        p.add_argument("--all-archs", action="store_true", help=f"build for {','.join(ALL_ARCHS)} (make package)")
        p.add_argument("--cuda", type=int, help="the CUDA major version to build with (default: what suits the driver)")
        if name == "install":
            p.add_argument("--venv", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        machine = detect(args.probe)
        if args.command == "detect":
            for gpu in machine.gpus:
                print(f"GPU: {gpu.name}, compute capability {gpu.compute_capability} (sm_{gpu.arch}), driver {gpu.driver}")
            if machine.gpus:
                cuda = ".".join(map(str, machine.driver_cuda)) if machine.driver_cuda else "unknown"
                print(f"driver runs CUDA up to {cuda} (found by {machine.source})")
                found = system_toolkit()
                print(f"system nvcc: {found[0] + ' in ' + str(found[1]) if found else 'none'}")
                try:
                    archs = choose_archs(machine, os.environ.get("CUDA_ARCHS"), False)
                    version, top = pick_toolkit_version(machine, archs, None)
                    where = f"the system's nvcc {version}" if top else f"CUDA {version} from PyPI"
                    print(f"would build: cuda for sm_{', sm_'.join(archs)} with {where}")
                except BuildError as exc:
                    print(f"would build: cpu ({exc})")
            else:
                print(f"no NVIDIA GPU: {machine.source}")
                print("would build: cpu")
            return 0
        variant = args.variant if args.variant != "auto" else ("cuda" if machine.gpus else "cpu")
        if args.command == "cmake-args":
            if variant == "cpu":
                print(os.environ.get("CMAKE_ARGS") or CPU_DEFAULT_ARGS)
            else:
                archs = choose_archs(machine, args.archs or os.environ.get("CUDA_ARCHS"), args.all_archs)
                version, top = pick_toolkit_version(machine, archs, args.cuda)
                root = toolkit_work(version, top is not None) / "root"
                print(shlex.join(cuda_cmake_args(Toolkit(root, version, str(top)), archs)))
            return 0
        if args.command == "wheel":
            python = sys.executable
            if variant == "cpu":
                print(build_cpu_wheel(python))
            else:
                archs = choose_archs(machine, args.archs or os.environ.get("CUDA_ARCHS"), args.all_archs)
                version, top = pick_toolkit_version(machine, archs, args.cuda)
                built = find_wheel(wheel_dir("cuda", version, archs))
                print(built or build_cuda_wheel(python, prepare_toolkit(python, version, top), archs))
            return 0
        install(args.venv, args.variant, args.archs, args.all_archs, args.probe, args.cuda)
        return 0
    except BuildError as exc:
        print(f"llama_build: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"llama_build: {shlex.join(map(str, exc.cmd))} failed (exit {exc.returncode})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

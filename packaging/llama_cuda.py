"""The CUDA toolchain: which nvcc can build for this machine, one CUDAToolkit_ROOT put together from the
system's toolkit or PyPI's nvidia-* packages (with a libcuda stub), and the CUDA build's CMAKE_ARGS."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llama_common import CUDA_WORK, BuildError, pip_target
from llama_gpus import Machine

# CUDA's toolchain from PyPI when no nvcc is on PATH: only CUDA 13 has a compiler there (drivers from 580
# up, RTX 20 to RTX 50); CUDA 12's nvidia-cuda-nvcc-cu12 holds ptxas alone.
PYPI_CUDA = "13.0"


@dataclass(frozen=True, slots=True)
class Toolkit:
    root: Path  # one folder with bin/nvcc, include/ and lib64/ (CMake's CUDAToolkit_ROOT)
    version: str  # "13.0"
    origin: str  # "system nvcc at ..." or "PyPI"


def runtime_packages(version: str) -> list[str]:
    """The PyPI packages that supply libcudart and libcublas of a CUDA version at run time."""
    if int(version.split(".")[0]) >= 13:
        return [f"nvidia-cuda-runtime=={version}.*", f"nvidia-cublas=={version}.*"]
    return [f"nvidia-cuda-runtime-cu12=={version}.*", f"nvidia-cublas-cu12=={version}.*"]


def _nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"release (\d+)\.(\d+)", out)
    return f"{found[1]}.{found[2]}" if found else None


def _nvcc_top(nvcc: str) -> Path | None:
    """The toolkit folder nvcc itself uses (nvcc on PATH is often a wrapper or a symlink)."""
    try:
        out = subprocess.run([nvcc, "-dryrun", "-x", "cu", "-E", os.devnull, "-o", os.devnull],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^#\$ _HERE_=(.+)$", out.stdout + out.stderr, re.M)
    return Path(found[1].strip()).resolve().parent if found else None


def system_toolkit() -> tuple[str, Path] | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    version, top = _nvcc_version(nvcc), _nvcc_top(nvcc)
    return (version, top) if version and top else None


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def pick_toolkit_version(machine: Machine, archs: tuple[str, ...], want_major: int | None) -> tuple[str, Path | None]:
    """(CUDA version, system toolkit folder or None for PyPI's): the system nvcc unless it cannot serve."""
    found = system_toolkit()
    lowest = min(int(re.sub(r"\D", "", a)) for a in archs)
    driver = machine.driver_cuda
    if found:
        version = _version_tuple(found[0])
        wanted = want_major is None or version[0] == want_major
        too_new = driver is not None and version[0] > driver[0]
        too_old = version < (12, 0) or ("120" in archs and version < (12, 8))
        if wanted and not too_new and not too_old and not (version[0] >= 13 and lowest < 75):
            return found
    # PyPI's only CUDA compiler is CUDA 13's (nvidia-cuda-nvcc-cu12 holds ptxas alone): it needs a
    # driver from 580 up and a card from RTX 20 (sm_75) up.
    problems = []
    if want_major not in (None, 13):
        problems.append(f"a CUDA {want_major} build needs nvcc {want_major}.x on PATH")
    if driver is not None and driver < (13, 0):
        problems.append(f"the driver runs CUDA up to {driver[0]}.{driver[1]}, and PyPI's CUDA compiler is {PYPI_CUDA} "
                        "(drivers from 580 up)")
    if lowest < 75:
        problems.append(f"CUDA 13 does not build for sm_{lowest} (cards before RTX 20)")
    if problems:
        have = f"nvcc {found[0]} in {found[1]}" if found else "no nvcc on PATH"
        raise BuildError(
            f"no CUDA compiler here can build llama.cpp for this machine ({have}; " + "; ".join(problems)
            + "): install a CUDA 12 toolkit so that nvcc is on PATH, or a newer NVIDIA driver; the CPU build works as is"
        )
    return PYPI_CUDA, None



def _link_tree(source: Path, dest: Path) -> None:
    """Symlink each entry of `source` into `dest` (the first source to supply a name wins)."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        link = dest / entry.name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(entry)


def _unversioned_links(lib64: Path) -> None:
    """libcublas.so -> libcublas.so.13 etc.: the names the linker and CMake look for (wheels ship only those)."""
    for lib in sorted(lib64.iterdir()):
        match = re.fullmatch(r"(lib\w+\.so)\.\d+", lib.name)
        if match and not (lib64 / match[1]).exists():
            (lib64 / match[1]).symlink_to(lib.name)


def write_cuda_stub(include: Path, dest: Path) -> Path:
    """A libcuda.so with every driver function of cuda.h, to link against where no driver is installed.

    Like the toolkit's lib64/stubs/libcuda.so, which PyPI's packages do not ship: it records
    libcuda.so.1 as needed; the real driver provides the functions at run time.
    """
    header = subprocess.run(
        ["cc", "-E", "-P", "-I", str(include), str(include / "cuda.h")], capture_output=True, text=True, check=True
    ).stdout
    names = sorted(set(re.findall(r"\bCUresult\s+(cu\w+)\s*\(", header)))
    if len(names) < 100:
        raise BuildError(f"{include / 'cuda.h'} declares only {len(names)} driver functions: not a CUDA toolkit?")
    dest.mkdir(parents=True, exist_ok=True)
    source = dest / "libcuda_stub.c"
    source.write_text("".join(f"int {name}(void) {{ return 999; }}\n" for name in names))  # CUDA_ERROR_UNKNOWN
    stub = dest / "libcuda.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(stub), str(source)], check=True)
    return stub


def toolkit_work(version: str, system: bool) -> Path:
    return CUDA_WORK / (f"cu{version}" if system else f"cu{version}-pypi")


def prepare_toolkit(python: str, version: str, system_top: Path | None) -> Toolkit:
    """One CUDAToolkit_ROOT under build/cuda/: the system toolkit or PyPI's, with cuBLAS and a libcuda stub."""
    work = toolkit_work(version, system_top is not None)
    sources: list[Path] = []
    if system_top is not None:
        sources.append(system_top)
        origin = f"system nvcc in {system_top}"
        has_cublas = any((system_top / d / "libcublas.so").exists() for d in ("lib64", "lib"))
        if not has_cublas:
            major = int(version.split(".")[0])
            cublas = f"nvidia-cublas=={version}.*" if major >= 13 else f"nvidia-cublas-cu12=={version}.*"
            pypi = pip_target(python, work / "pypi", [cublas])
            sources += _package_roots(pypi)
            origin += f", cuBLAS from PyPI ({cublas})"
    else:
        # The pieces of CUDA 13's toolkit on PyPI (they all install into nvidia/cu13/).
        names = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-cccl",
                 "nvidia-cuda-culibos", "nvidia-cublas")
        packages = [f"{name}=={version}.*" for name in names]
        pypi = pip_target(python, work / "pypi", packages)
        sources += _package_roots(pypi)
        origin = "PyPI (" + ", ".join(packages) + ")"
    root = work / "root"
    shutil.rmtree(root, ignore_errors=True)
    for source in sources:
        for sub, dest in (("bin", "bin"), ("nvvm", "nvvm"), ("include", "include"), ("lib64", "lib64"), ("lib", "lib64")):
            if (source / sub).is_dir() and not (source / sub).is_symlink():
                _link_tree(source / sub, root / dest)
    for needed in ("bin/nvcc", "include/cuda_runtime.h", "include/cublas_v2.h"):
        if not (root / needed).exists():
            raise BuildError(f"the CUDA toolkit put together in {root} has no {needed} ({origin})")
    _unversioned_links(root / "lib64")
    if not (root / "lib64" / "stubs" / "libcuda.so").exists():
        if (root / "lib64" / "stubs").is_symlink():
            (root / "lib64" / "stubs").unlink()
        write_cuda_stub(root / "include", root / "lib64" / "stubs")
    return Toolkit(root=root, version=version, origin=origin)


def _package_roots(site: Path) -> list[Path]:
    """The toolkit-like folders of nvidia-* packages: nvidia/cu13 (CUDA 13) or nvidia/<package> (CUDA 12)."""
    nvidia = site / "nvidia"
    return sorted(p for p in nvidia.iterdir() if p.is_dir() and ((p / "include").is_dir() or (p / "lib").is_dir()))


def cuda_cmake_args(toolkit: Toolkit | None, archs: tuple[str, ...]) -> list[str]:
    args = [
        "-DGGML_CUDA=on",
        "-DGGML_NATIVE=OFF",
        "-DGGML_BACKEND_DL=ON",
        "-DGGML_CPU_ALL_VARIANTS=OFF",
        f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}",
        "-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON",
        "-DCMAKE_INSTALL_LIBDIR=llama_cpp/lib",
        "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib",
        "-DCMAKE_INSTALL_INCLUDEDIR=llama_cpp/include",
    ]
    if toolkit is not None:
        args += [
            f"-DCUDAToolkit_ROOT={toolkit.root}",
            f"-DCMAKE_CUDA_COMPILER={toolkit.root / 'bin' / 'nvcc'}",
            f"-DCUDA_cuda_driver_LIBRARY={toolkit.root / 'lib64' / 'stubs' / 'libcuda.so'}",
        ]
    return args


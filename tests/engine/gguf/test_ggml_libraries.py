"""engine/gguf/ggml_libraries.py: a CUDA build of llama.cpp falls back to the CPU, and says why in one line.

The reasons are checked on real library files (a backend library that needs a libcuda.so.1 that is not
there, built here with the C compiler). The whole fallback runs where the installed llama-cpp-python is
Tailor's CUDA build (the scratch venv of packaging/README.md, a GPU machine); elsewhere it is skipped.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import llama_cpp
import pytest

from engine.gguf.ggml_libraries import _preload_cuda_libraries, cuda_fallback_reason
from engine.starter import starter_model_path

LIB_DIR = Path(llama_cpp.__file__).parent / "lib"
# Whether a libcuda.so.1 (a driver) can be loaded here, asked in a child process: loading it into the
# test process would make every later check find one.
DRIVER = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libcuda.so.1')"],
                        capture_output=True).returncode == 0
DL_CUDA_BUILD = (LIB_DIR / "libggml-cuda.so").exists() and (LIB_DIR / "libggml-cpu.so").exists() and not any(
    LIB_DIR.glob("libggml.so.*")
)


def _library_needing_libcuda(folder: Path) -> Path:
    """A libggml-cuda.so that links libcuda.so.1, as the real one does, on a machine without it."""
    fake = folder / "fake-driver"
    fake.mkdir()
    (fake / "cuda.c").write_text("int cuInit(unsigned int flags) { return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(fake / "libcuda.so"),
                    str(fake / "cuda.c")], check=True)
    (folder / "ggml.c").write_text("int cuInit(unsigned int); int ggml_backend_init(void) { return cuInit(0); }\n")
    lib = folder / "libggml-cuda.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,--no-as-needed", "-o", str(lib), str(folder / "ggml.c"),
                    f"-L{fake}", "-lcuda"], check=True)
    shutil.rmtree(fake)  # the "driver" is gone
    return lib


def test_a_build_without_cuda_or_with_a_cuda_device_has_nothing_to_say(tmp_path):
    assert cuda_fallback_reason(tmp_path, {"CPU": 1}) is None  # no libggml-cuda.so: not a CUDA build
    (tmp_path / "libggml-cuda.so").write_bytes(b"")
    assert cuda_fallback_reason(tmp_path, {"CPU": 1, "CUDA": 1}) is None


@pytest.mark.skipif(shutil.which("cc") is None or DRIVER, reason="needs a C compiler and no libcuda.so.1")
def test_no_driver_names_the_missing_libcuda(tmp_path):
    _library_needing_libcuda(tmp_path)
    reason = cuda_fallback_reason(tmp_path, {"CPU": 1})
    assert reason.startswith("its CUDA backend could not be loaded (")
    assert "libcuda.so.1: cannot open shared object file" in reason and "is the NVIDIA driver installed?" in reason


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_cuda_libraries_of_pypi_packages_elsewhere_on_sys_path_are_found(tmp_path, monkeypatch):
    # As `pip install --target` leaves it: llama_cpp in one folder, the nvidia-* packages in another.
    nvidia_lib = tmp_path / "site-packages" / "nvidia" / "cu13" / "lib"
    nvidia_lib.mkdir(parents=True)
    (tmp_path / "blas.c").write_text("int tailor_test_blas(void) { return 13; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libtailortestblas.so.13", "-o",
                    str(nvidia_lib / "libtailortestblas.so.13"), str(tmp_path / "blas.c")], check=True)
    (nvidia_lib / "libtailortestblas.so").symlink_to("libtailortestblas.so.13")
    (tmp_path / "ggml.c").write_text("int tailor_test_blas(void); int ggml_backend_init(void) { return tailor_test_blas(); }\n")
    backend = tmp_path / "libggml-cuda.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,--no-as-needed", "-o", str(backend), str(tmp_path / "ggml.c"),
                    f"-L{nvidia_lib}", "-ltailortestblas"], check=True)
    (nvidia_lib / "libtailortestblas.so").unlink()
    with pytest.raises(OSError, match="libtailortestblas.so.13: cannot open shared object file"):
        ctypes.CDLL(str(backend))
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path / "site-packages")])
    _preload_cuda_libraries(backend)
    assert ctypes.CDLL(str(backend)).ggml_backend_init() == 13


def test_a_cuda_backend_without_devices_says_why(tmp_path, monkeypatch):
    (tmp_path / "libggml-cuda.so").write_bytes(b"")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cuda_fallback_reason(tmp_path, {"CPU": 1, "CUDA": 0}) == "CUDA_VISIBLE_DEVICES='' hides every GPU"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert cuda_fallback_reason(tmp_path, {"CPU": 1, "CUDA": 0}).startswith("CUDA found no usable GPU (")


_CHAT = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
    import llama_cpp
    from engine.gguf.ggml_libraries import load_backends
    if sys.argv[2] == "load":
        load_backends()
    llm = llama_cpp.Llama(sys.argv[1], n_ctx=256, n_gpu_layers=-1, verbose=False)
    out = llm("The capital of France is", max_tokens=4, temperature=0)
    print("ANSWER", out["choices"][0]["text"])
""")


@pytest.mark.skipif(not DL_CUDA_BUILD, reason="the installed llama-cpp-python is not Tailor's CUDA build")
@pytest.mark.parametrize("visible", [None, ""])
def test_the_cuda_build_answers_on_the_cpu_where_no_gpu_is_usable(visible):
    if visible is None and DRIVER:
        pytest.skip("an NVIDIA driver is installed: the GPU may be usable (CUDA_VISIBLE_DEVICES='' is the case here)")
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    model = str(starter_model_path())
    run = [sys.executable, "-c", _CHAT, model]
    without = subprocess.run([*run, "skip"], capture_output=True, text=True, env=env, timeout=120)
    assert without.returncode != 0  # llama-cpp-python alone loads no backend of this build
    done = subprocess.run([*run, "load"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ANSWER " in done.stdout and "Paris" in done.stdout.split("ANSWER ", 1)[1]
    warnings = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and warnings[0].endswith(": running on the CPU"), done.stdout
    if not DRIVER:  # its library is named
        assert "libcuda.so.1: cannot open shared object file" in warnings[0]
    else:  # a driver, but every GPU hidden
        assert "CUDA_VISIBLE_DEVICES=''" in warnings[0]

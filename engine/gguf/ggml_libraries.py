"""Load llama.cpp's backends where the build keeps them as separate libraries (GGML_BACKEND_DL).

Tailor's CUDA build (packaging/llama_build.py) keeps ggml's CPU and CUDA backends in libraries that are
only dlopen'ed, so that one wheel also runs where no NVIDIA driver or GPU is usable: there the CUDA
backend does not load, or loads with no device, and the CPU backend answers. llama-cpp-python 0.3.36
never loads such backends itself (a model load then fails with "no backends are loaded"), so the engine
calls load_backends() once before its first model. A normal build registers its backends as ggml
loads, and this is a no-op there.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import sys
from pathlib import Path

log = logging.getLogger(__name__)


class _Registry:
    """The few ggml registry functions needed here, declared on one copy of libggml."""

    def __init__(self, lib: ctypes.CDLL):
        self.count = lib.ggml_backend_reg_count
        self.count.argtypes, self.count.restype = [], ctypes.c_size_t
        self.get = lib.ggml_backend_reg_get
        self.get.argtypes, self.get.restype = [ctypes.c_size_t], ctypes.c_void_p
        self.name = lib.ggml_backend_reg_name
        self.name.argtypes, self.name.restype = [ctypes.c_void_p], ctypes.c_char_p
        self.dev_count = lib.ggml_backend_reg_dev_count
        self.dev_count.argtypes, self.dev_count.restype = [ctypes.c_void_p], ctypes.c_size_t
        self.load_all = lib.ggml_backend_load_all_from_path
        self.load_all.argtypes, self.load_all.restype = [ctypes.c_char_p], None

    def backends(self) -> dict[str, int]:
        """Backend name -> number of devices, as registered now."""
        regs = (self.get(i) for i in range(self.count()))
        return {(self.name(reg) or b"?").decode(errors="replace"): int(self.dev_count(reg)) for reg in regs}


def llama_lib_dir() -> Path:
    """Where llama-cpp-python keeps libllama and ggml's libraries."""
    from engine.gguf.llama_handle import library_dir

    return library_dir()


def registered_backends() -> dict[str, int]:
    """ggml's backends as registered now (name -> number of devices)."""
    from engine.gguf.llama_handle import ggml_library

    return _Registry(ggml_library()).backends()


@functools.cache
def load_backends() -> None:
    """Register the backend libraries beside libllama with ggml, once per process. Never raises for a
    backend that cannot load: that backend is left out (and said why in one line) and the others run."""
    from engine.gguf.llama_handle import ggml_library

    registry = _Registry(ggml_library())
    if registry.count() > 0:
        return  # backends built into libggml (the normal build)
    lib_dir = llama_lib_dir()
    if (lib_dir / "libggml-cuda.so").exists():
        _preload_cuda_libraries(lib_dir / "libggml-cuda.so")
    registry.load_all(os.fsencode(lib_dir))
    for other in _soname_copies(lib_dir):
        # A build with versioned library names holds two copies of libggml, each with its own
        # registry: llama_cpp's `libggml.so` and the `libggml.so.0` that libllama links. Both must know
        # the backends (Tailor's build has unversioned names and one copy).
        _Registry(other).load_all(os.fsencode(lib_dir))
    backends = registry.backends()
    if "CPU" not in backends:
        log.error("llama.cpp loaded no CPU backend from %s (found: %s)", lib_dir, ", ".join(backends) or "none")
        return
    log.info("llama.cpp backends from %s: %s", lib_dir, ", ".join(f"{n} ({d} devices)" for n, d in backends.items()))
    reason = cuda_fallback_reason(lib_dir, backends)
    if reason:
        log.warning("llama.cpp is built with CUDA, but %s: running on the CPU", reason)


def _preload_cuda_libraries(cuda: Path) -> None:
    """Load the CUDA runtime and cuBLAS that libggml-cuda.so needs from PyPI's nvidia-* packages on
    sys.path, when its RPATH does not reach them (a wheel installed with `pip --target`, PyTorch's
    packages in another site-packages). Once loaded, the loader finds them by name for ggml."""
    for _ in range(8):  # each round loads one missing library
        try:
            ctypes.CDLL(str(cuda))
            return
        except OSError as exc:
            missing = re.match(r"(lib[\w+.-]+\.so[.\d]*): cannot open shared object file", str(exc))
            found = _in_nvidia_packages(missing[1]) if missing else None
            if found is None:
                return  # not one of theirs (no driver: libcuda.so.1): cuda_fallback_reason says so
            ctypes.CDLL(str(found))


def _in_nvidia_packages(name: str) -> Path | None:
    for entry in sys.path:
        for path in sorted(Path(entry or ".").glob(f"nvidia/*/lib/{name}")):
            return path
    return None


def _soname_copies(lib_dir: Path) -> list[ctypes.CDLL]:
    return [ctypes.CDLL(str(p)) for p in sorted(lib_dir.glob("libggml.so.*")) if re.fullmatch(r"libggml\.so\.\d+", p.name)]


def cuda_fallback_reason(lib_dir: Path, backends: dict[str, int]) -> str | None:
    """Why a CUDA build offers no CUDA device here, or None when it does (or is no CUDA build)."""
    cuda = lib_dir / "libggml-cuda.so"
    if not cuda.exists() or backends.get("CUDA", 0) > 0:
        return None
    if "CUDA" not in backends:
        try:  # ggml loads backends silently in a release build: load it again to learn why it failed
            ctypes.CDLL(str(cuda))
        except OSError as exc:
            hint = "; is the NVIDIA driver installed?" if "libcuda.so" in str(exc) else ""
            return f"its CUDA backend could not be loaded ({exc}{hint})"
        return "its CUDA backend did not register"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    return f"CUDA found no usable GPU ({_cuda_runtime_error()})"


def _cuda_runtime_error() -> str:
    """The CUDA runtime's own answer to 'how many devices?', e.g. 'CUDA driver version is insufficient'."""
    try:
        maps = Path("/proc/self/maps").read_text()
        found = re.search(r"(/\S*/libcudart\.so[.\d]*)$", maps, re.M)
        if found is None:
            return "the CUDA runtime is not loaded"
        cudart = ctypes.CDLL(found[1])  # the copy ggml-cuda already loaded
        cudart.cudaGetErrorString.restype = ctypes.c_char_p
        count = ctypes.c_int(0)
        code = cudart.cudaGetDeviceCount(ctypes.byref(count))
        if code == 0:
            return f"the CUDA runtime sees {count.value} devices"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        text = (cudart.cudaGetErrorString(code) or b"error %d" % code).decode(errors="replace")
        return text + (f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "")
    except (OSError, AttributeError) as exc:
        return f"no detail: {exc}"

"""Ask llama.cpp which devices it can use, from a short-lived child process.

The front ends may not import llama_cpp (and a CUDA driver that crashes while it initialises must not
take the window down), so the list is read where the engine reads it: in a spawned process, as the
engine itself is started (this works in the PyInstaller bundle too). Costs about half a second, so
callers ask only when it can change the answer (see app.services.planning.machine).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

from models.hardware.backend_devices import LlamaDevices, unknown_devices

PROBE_TIMEOUT_S = 30.0
# ggml's GPU backends, as their libraries are named (libggml-cuda.so, ggml-vulkan.dll, ...).
GPU_BACKEND_LIBRARIES = ("ggml-cuda", "ggml-vulkan", "ggml-metal", "ggml-hip", "ggml-sycl", "ggml-opencl", "ggml-musa")


def _probe_child(reply: Connection) -> None:
    # ggml prints its CUDA/Vulkan initialisation to stderr before any log callback could be set.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from engine.gguf.devices import read_devices

    reply.send(read_devices().to_dict())
    reply.close()


def probe_llama_devices(timeout_s: float = PROBE_TIMEOUT_S) -> LlamaDevices:
    """ggml's device list as the engine would see it. Never raises: failures come back as `error`."""
    if importlib.util.find_spec("llama_cpp") is None:
        return unknown_devices("llama-cpp-python is not installed")
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_probe_child, args=(send,), name="tailor-device-probe", daemon=True)
    process.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            return unknown_devices(f"llama.cpp did not list its devices within {timeout_s:.0f} s")
        return LlamaDevices.from_dict(receive.recv())
    except EOFError:
        process.join(5.0)
        return unknown_devices(f"llama.cpp crashed while listing its devices (exit code {process.exitcode})")
    finally:
        receive.close()
        process.join(5.0)
        if process.is_alive():
            process.kill()
            process.join(2.0)


def gpu_backend_installed() -> bool:
    """Whether the installed llama-cpp-python holds any GPU backend library (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return False
    package = Path(next(iter(spec.submodule_search_locations)))
    # Where a wheel puts ggml's libraries: inside the package, and (dynamically loaded backends) in
    # site-packages' bin/ and lib/ folders beside it.
    folders = (package / "lib", package, package.parent / "bin", package.parent / "lib")
    for folder in folders:
        try:
            names = [p.name.lower() for p in folder.iterdir()]
        except OSError:
            continue
        if any(lib in name for name in names for lib in GPU_BACKEND_LIBRARIES):
            return True
    return False

"""ggml's device list, read in this process through the llama.cpp that llama-cpp-python loaded.

llama-cpp-python binds none of ggml's device functions, so the few needed are declared here on its
own libggml (llama_handle.ggml_library) (the same library, hence the same registry, that model loading uses).
"""

from __future__ import annotations

import ctypes
import logging

from models.hardware.backend_devices import DEVICE_KINDS, BackendDevice, LlamaDevices
from models.plan.cpu_repack import parse_system_info

log = logging.getLogger(__name__)


class _GgmlDevices:
    """The ggml device functions, declared once on libggml."""

    def __init__(self, lib: ctypes.CDLL):
        self.count = lib.ggml_backend_dev_count
        self.count.argtypes, self.count.restype = [], ctypes.c_size_t
        self.get = lib.ggml_backend_dev_get
        self.get.argtypes, self.get.restype = [ctypes.c_size_t], ctypes.c_void_p
        self.name = lib.ggml_backend_dev_name
        self.description = lib.ggml_backend_dev_description
        for fn in (self.name, self.description):
            fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_char_p
        self.type = lib.ggml_backend_dev_type
        self.type.argtypes, self.type.restype = [ctypes.c_void_p], ctypes.c_int
        self.memory = lib.ggml_backend_dev_memory
        self.memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        self.memory.restype = None

    def device(self, index: int) -> BackendDevice:
        dev = self.get(index)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        self.memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = self.type(dev)
        return BackendDevice(
            name=(self.name(dev) or b"").decode(errors="replace"),
            description=(self.description(dev) or b"").decode(errors="replace"),
            kind=DEVICE_KINDS[kind] if 0 <= kind < len(DEVICE_KINDS) else f"type {kind}",
            free_bytes=int(free.value),
            total_bytes=int(total.value),
        )


def read_devices() -> LlamaDevices:
    """The devices llama.cpp here can use. Never raises: a failure is the answer's `error`."""
    try:
        from engine.gguf.ggml_libraries import (
            cuda_fallback_reason,
            llama_lib_dir,
            load_backends,
            registered_backends,
        )
        from engine.gguf.llama_handle import ggml_library, gpu_offload_supported, system_info

        load_backends()  # a build with dynamically loaded backends lists nothing before
        ggml = _GgmlDevices(ggml_library())
        devices = tuple(ggml.device(i) for i in range(ggml.count()))
        backends = registered_backends()
        return LlamaDevices(
            gpu_offload=gpu_offload_supported(), devices=devices, backends=tuple(backends),
            cuda_problem=cuda_fallback_reason(llama_lib_dir(), backends),
            cpu_features=tuple(sorted(parse_system_info(system_info()))),
        )
    except Exception as exc:  # an old or odd build: say what failed, plan as if nothing were known
        log.warning("could not read llama.cpp's device list: %s", exc)
        return LlamaDevices(gpu_offload=False, devices=(), error=f"llama.cpp's device list could not be read: {exc}")


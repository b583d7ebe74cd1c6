"""NVML through pynvml, behind a small interface so tests hand in a faithful fake."""

from __future__ import annotations

from typing import Any, Protocol

# NVML return codes (nvml.h); fixed by the C API, so no pynvml import is needed to read them.
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

_NVML_REASONS = {
    NVML_ERROR_LIBRARY_NOT_FOUND: "no NVIDIA driver is installed: the NVML library libnvidia-ml was not found",
    NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA driver is not loaded",
    NVML_ERROR_NO_PERMISSION: "no permission to query the NVIDIA driver",
    NVML_ERROR_FUNCTION_NOT_FOUND: "the NVIDIA driver is too old for this query",
    NVML_ERROR_GPU_IS_LOST: "the GPU is lost: it stopped answering the driver",
    NVML_ERROR_RESET_REQUIRED: "the GPU needs a reset",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "the NVIDIA driver and its NVML library differ in version; reboot after a driver update",
}


class NvmlApi(Protocol):
    """The NVML queries the profile needs, with plain Python results.

    Methods raise whatever the underlying library raises (pynvml's `NVMLError` subclasses,
    whose `.value` is the NVML return code).
    """

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def device_count(self) -> int: ...
    def device(self, index: int) -> object: ...
    def name(self, handle: object) -> str: ...
    def uuid(self, handle: object) -> str: ...
    def memory(self, handle: object) -> tuple[int, int, int]: ...
    def compute_capability(self, handle: object) -> tuple[int, int]: ...
    def process_memory(self, handle: object) -> dict[int, int | None]: ...
    def driver_version(self) -> str: ...
    def cuda_version(self) -> str: ...


class Pynvml:
    """`NvmlApi` over the `pynvml` module (package nvidia-ml-py) or an object with its functions.

    Evens out what pynvml versions differ in: names come back as bytes from old ones.
    """

    def __init__(self, module: Any) -> None:
        self._nvml = module

    @classmethod
    def load(cls) -> Pynvml:
        """Wrap the installed `pynvml`; raises ImportError when nvidia-ml-py is missing."""
        import pynvml

        return cls(pynvml)

    def init(self) -> None:
        self._nvml.nvmlInit()

    def shutdown(self) -> None:
        self._nvml.nvmlShutdown()

    def device_count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def device(self, index: int) -> object:
        return self._nvml.nvmlDeviceGetHandleByIndex(index)

    def name(self, handle: object) -> str:
        return _text(self._nvml.nvmlDeviceGetName(handle))

    def uuid(self, handle: object) -> str:
        return _text(self._nvml.nvmlDeviceGetUUID(handle))

    def memory(self, handle: object) -> tuple[int, int, int]:
        info = self._nvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.total), int(info.free), int(info.used)

    def compute_capability(self, handle: object) -> tuple[int, int]:
        major, minor = self._nvml.nvmlDeviceGetCudaComputeCapability(handle)
        return int(major), int(minor)

    def process_memory(self, handle: object) -> dict[int, int | None]:
        """Bytes per process id on this GPU (None where the driver does not say, as on WDDM)."""
        usage: dict[int, int | None] = {}
        for query in (
            self._nvml.nvmlDeviceGetComputeRunningProcesses,
            self._nvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            for proc in query(handle):
                used = proc.usedGpuMemory
                known = usage.get(proc.pid, 0)
                usage[proc.pid] = None if used is None or known is None else max(known, int(used))
        return usage

    def driver_version(self) -> str:
        return _text(self._nvml.nvmlSystemGetDriverVersion())

    def cuda_version(self) -> str:
        version = int(self._nvml.nvmlSystemGetCudaDriverVersion())  # e.g. 12040
        return f"{version // 1000}.{version % 1000 // 10}"


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def nvml_error_code(exc: BaseException) -> int | None:
    """The NVML return code an exception carries (pynvml's `NVMLError.value`), if any."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def describe_nvml_error(exc: BaseException) -> str:
    """Plain words for a failed NVML call."""
    code = nvml_error_code(exc)
    if code in _NVML_REASONS:
        return _NVML_REASONS[code]
    if code is not None:
        return f"NVML error {code}: {exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__



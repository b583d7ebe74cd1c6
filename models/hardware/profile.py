"""The machine a model must fit on: NVIDIA GPUs through NVML, RAM and CPU through psutil.

`detect_hardware()` never raises: with no driver, no NVML library, no `pynvml` package or a
GPU that fails while it is read, it returns a valid profile with the GPUs that could be read
(often none) and says why in `source`. NVML is reached through `NvmlApi`, so tests hand in
a fake pynvml instead of patching it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil

from models.hardware.backend_devices import LlamaDevices
from models.hardware.gpu_catalog import find_gpu
from models.hardware.nvml import (  # noqa: F401 - Pynvml and NvmlApi are part of this module's API
    NVML_ERROR_GPU_IS_LOST,
    NvmlApi,
    Pynvml,
    describe_nvml_error,
    nvml_error_code,
)

GIB = 1024**3

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One NVIDIA GPU as NVML reports it (or as a hypothetical machine has it).

    `used_bytes` counts everything in use, by any process and by the driver;
    `used_by_others_bytes` is what processes other than this one hold (None: unknown).
    `driver_version` is "" and `cuda_version` None where unknown (e.g. hypothetical cards).
    """

    index: int
    name: str
    uuid: str
    compute_capability: tuple[int, int] | None
    total_bytes: int
    free_bytes: int
    used_bytes: int
    driver_version: str
    cuda_version: str | None
    used_by_others_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; the compute capability is a [major, minor] list or None."""
        data = {name: getattr(self, name) for name in self.__slots__}
        if self.compute_capability is not None:
            data["compute_capability"] = list(self.compute_capability)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuInfo:
        """The inverse of `to_dict`."""
        cc = data["compute_capability"]
        return cls(
            index=int(data["index"]),
            name=str(data["name"]),
            uuid=str(data["uuid"]),
            compute_capability=None if cc is None else (int(cc[0]), int(cc[1])),
            total_bytes=int(data["total_bytes"]),
            free_bytes=int(data["free_bytes"]),
            used_bytes=int(data["used_bytes"]),
            driver_version=str(data["driver_version"]),
            cuda_version=data["cuda_version"],
            used_by_others_bytes=data.get("used_by_others_bytes"),
        )


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    """GPUs, RAM and CPU of a machine, and where the GPU figures came from.

    `source` is "nvml" (with the GPUs skipped and why in parentheses, if any),
    "none: <reason>" when no GPU could be read, or "hypothetical" for `profile_for`.
    `llama` is what the installed llama.cpp can offload to (ggml's device list), None where it was
    not asked (a hypothetical machine: planned as if llama.cpp used its GPU).
    """

    gpus: tuple[GpuInfo, ...]
    ram_total_bytes: int
    ram_available_bytes: int
    cpu_physical_cores: int
    cpu_logical_cores: int
    cpu_name: str
    source: str
    llama: LlamaDevices | None = None

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def best_gpu(self) -> GpuInfo | None:
        """The GPU with the most free memory (then the most memory, then the lowest index)."""
        if not self.gpus:
            return None
        return max(self.gpus, key=lambda gpu: (gpu.free_bytes, gpu.total_bytes, -gpu.index))

    @property
    def total_vram(self) -> int:
        """Bytes of memory on all GPUs together."""
        return sum(gpu.total_bytes for gpu in self.gpus)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (`json.dumps` takes it as is)."""
        data = {name: getattr(self, name) for name in self.__slots__}
        data["gpus"] = [gpu.to_dict() for gpu in self.gpus]
        data["llama"] = self.llama.to_dict() if self.llama is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HardwareProfile:
        """The inverse of `to_dict`."""
        return cls(
            gpus=tuple(GpuInfo.from_dict(gpu) for gpu in data["gpus"]),
            ram_total_bytes=int(data["ram_total_bytes"]),
            ram_available_bytes=int(data["ram_available_bytes"]),
            cpu_physical_cores=int(data["cpu_physical_cores"]),
            cpu_logical_cores=int(data["cpu_logical_cores"]),
            cpu_name=str(data["cpu_name"]),
            source=str(data["source"]),
            llama=LlamaDevices.from_dict(data["llama"]) if data.get("llama") else None,
        )


def detect_hardware(nvml: NvmlApi | None = None) -> HardwareProfile:
    """The GPUs, RAM and CPU of this machine. Never raises.

    Args:
        nvml: The NVML to ask; default: `pynvml`, when installed.

    Returns:
        The profile; with no readable GPU, `gpus` is empty and `source` says why.
    """
    gpus, source = _detect_gpus(nvml)
    ram = psutil.virtual_memory()
    physical, logical = _cpu_cores()
    return HardwareProfile(
        gpus=gpus,
        ram_total_bytes=int(ram.total),
        ram_available_bytes=int(ram.available),
        cpu_physical_cores=physical,
        cpu_logical_cores=logical,
        cpu_name=cpu_name(),
        source=source,
    )


def _detect_gpus(nvml: NvmlApi | None) -> tuple[tuple[GpuInfo, ...], str]:
    if nvml is None:
        try:
            nvml = Pynvml.load()
        except ImportError:
            return (), "none: the nvidia-ml-py package (pynvml) is not installed"
    try:
        nvml.init()
    except Exception as exc:  # any failure means "no GPU", never a crash
        return (), f"none: {describe_nvml_error(exc)}"
    try:
        return _read_gpus(nvml)
    except Exception as exc:
        return (), f"none: {describe_nvml_error(exc)}"
    finally:
        try:
            nvml.shutdown()
        except Exception:
            pass


def _read_gpus(nvml: NvmlApi) -> tuple[tuple[GpuInfo, ...], str]:
    count = nvml.device_count()
    if count == 0:
        return (), "none: the NVIDIA driver reports no GPU"
    driver = _optional(nvml.driver_version) or ""
    cuda = _optional(nvml.cuda_version)
    gpus: list[GpuInfo] = []
    skipped: list[str] = []
    for index in range(count):
        try:
            gpus.append(_read_gpu(nvml, index, driver, cuda))
        except Exception as exc:  # one bad GPU must not hide the others
            skipped.append(f"GPU {index} skipped: {describe_nvml_error(exc)}")
    if not gpus:
        return (), "none: " + "; ".join(skipped)
    return tuple(gpus), "nvml" + (f" ({'; '.join(skipped)})" if skipped else "")


def _read_gpu(nvml: NvmlApi, index: int, driver: str, cuda: str | None) -> GpuInfo:
    handle = nvml.device(index)
    name = nvml.name(handle)
    total, free, used = nvml.memory(handle)
    processes = _optional(lambda: nvml.process_memory(handle))
    return GpuInfo(
        index=index,
        name=name,
        uuid=_optional(lambda: nvml.uuid(handle)) or "",
        compute_capability=_optional(lambda: nvml.compute_capability(handle)),
        total_bytes=total,
        free_bytes=free,
        used_bytes=used,
        driver_version=driver,
        cuda_version=cuda,
        used_by_others_bytes=None if processes is None else _others(processes),
    )


def _optional(query: Callable[[], T]) -> T | None:
    """A query whose failure leaves a field unknown; a lost GPU still fails the whole device."""
    try:
        return query()
    except Exception as exc:
        if nvml_error_code(exc) == NVML_ERROR_GPU_IS_LOST:
            raise
        return None


def _others(processes: Mapping[int, int | None]) -> int | None:
    own = os.getpid()
    held = [used for pid, used in processes.items() if pid != own]
    return None if any(used is None for used in held) else sum(used for used in held if used is not None)


def _cpu_cores() -> tuple[int, int]:
    """(physical, logical) core counts; physical falls back to logical where psutil cannot tell."""
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    return int(psutil.cpu_count(logical=False) or logical), int(logical)


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what `platform` knows."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Model") and value.strip():
            return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown CPU"


def parse_compute_capability(value: str | float | tuple[int, int]) -> tuple[int, int]:
    """(major, minor) from "8.9", 8.9 or (8, 9); ValueError for anything else."""
    if isinstance(value, tuple):
        major, minor = value
        return int(major), int(minor)
    text = str(value).strip()
    major, dot, minor = text.partition(".")
    if not (major.isdigit() and (not dot or minor.isdigit())):
        raise ValueError(f"not a compute capability: {value!r} (expected e.g. 8.9)")
    return int(major), int(minor or 0)


def profile_for(
    gpu_name: str | None = None,
    vram_gib: float | None = None,
    cc: str | float | tuple[int, int] | None = None,
    ram_gib: float | None = None,
) -> HardwareProfile:
    """A hypothetical machine: one empty GPU (or none), for planning without the hardware.

    Args:
        gpu_name: The card, e.g. "RTX 4090"; looked up in `models.hardware.gpu_catalog` for what
            is not given. None with no `vram_gib`: a machine without GPU.
        vram_gib: The card's memory in GiB; default: the catalog's figure for `gpu_name`.
        cc: Compute capability ("8.9", 8.9 or (8, 9)); default: the catalog's, else None.
        ram_gib: RAM in GiB, all of it available; default: this machine's RAM.

    Returns:
        A profile with `source="hypothetical"`; the CPU is this machine's.

    Raises:
        ValueError: A card not in the catalog without `vram_gib`, a size that is not
            positive, or a malformed `cc`.
    """
    gpus = (_hypothetical_gpu(gpu_name, vram_gib, cc),) if gpu_name is not None or vram_gib is not None else ()
    if ram_gib is None:
        ram_total = ram_available = int(psutil.virtual_memory().total)
    elif ram_gib <= 0:
        raise ValueError(f"RAM must be positive, not {ram_gib} GiB")
    else:
        ram_total = ram_available = int(ram_gib * GIB)
    physical, logical = _cpu_cores()
    return HardwareProfile(
        gpus=gpus,
        ram_total_bytes=ram_total,
        ram_available_bytes=ram_available,
        cpu_physical_cores=physical,
        cpu_logical_cores=logical,
        cpu_name=cpu_name(),
        source="hypothetical",
    )


def _hypothetical_gpu(gpu_name: str | None, vram_gib: float | None,
                      cc: str | float | tuple[int, int] | None) -> GpuInfo:
    """profile_for's one empty GPU: what is not given comes from the catalog."""
    card = find_gpu(gpu_name, vram_gib) if gpu_name else None
    if vram_gib is None:
        if card is None:
            raise ValueError(f"unknown GPU {gpu_name!r}: give its memory (--vram)")
        vram_gib = card.vram_gib
    if vram_gib <= 0:
        raise ValueError(f"GPU memory must be positive, not {vram_gib} GiB")
    if cc is not None:
        capability: tuple[int, int] | None = parse_compute_capability(cc)
    else:
        capability = card.compute_capability if card else None
    total = int(vram_gib * GIB)
    return GpuInfo(index=0, name=gpu_name or f"GPU with {vram_gib:g} GiB", uuid="", compute_capability=capability,
                   total_bytes=total, free_bytes=total, used_bytes=0, driver_version="", cuda_version=None,
                   used_by_others_bytes=0)

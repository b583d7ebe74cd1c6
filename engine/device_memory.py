"""What the OS and the NVIDIA driver say about this process's memory, per device.

Backends know their own parts (weights, KV cache, compute buffers); this module adds what
only the OS or the driver knows: the whole process's use of a device (RSS on the host,
NVML's per-process figure on a GPU) and the device's free and total memory. Both the GGUF
and the torch backend use it (`build_report`), so their reports mean the same thing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from engine.protocol import DeviceMemory, MemoryReport
from models.hardware.nvml import NvmlApi, Pynvml, describe_nvml_error

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class DeviceUsage:
    device: str  # "cpu" or "cuda:N" (N: the CUDA ordinal this process sees)
    name: str
    process_bytes: int | None  # this process's whole use; None where the driver does not say
    free_bytes: int
    total_bytes: int


class DeviceMeter:
    """Reads host and GPU memory for one process; NVML is initialised once, on first use.

    Args:
        nvml: the NVML to ask (tests hand in a fake); default: pynvml, when installed.
        pid: the process to account for; default: this one.
    """

    def __init__(self, nvml: NvmlApi | None = None, pid: int | None = None):
        self._nvml = nvml
        self._nvml_ready: bool | None = None  # None: not tried yet
        self._pid = pid or os.getpid()
        self._process = psutil.Process(self._pid)
        self._handles: dict[int, object] = {}
        self._indices: dict[int, int] = {}  # CUDA ordinal -> NVML index

    def host(self) -> DeviceUsage:
        vm = psutil.virtual_memory()
        try:
            rss: int | None = self._process.memory_info().rss
        except psutil.Error:
            rss = None
        return DeviceUsage("cpu", "RAM", rss, int(vm.available), int(vm.total))

    def gpu(self, ordinal: int, name: str | None = None) -> DeviceUsage | None:
        """CUDA device `ordinal` of this process, or None when NVML cannot read it.

        `name`, what CUDA (llama.cpp's device list) calls that card, picks NVML's card of that name
        where the two number them differently: CUDA puts the fastest card first, NVML the first on
        the PCI bus, so a 4090 beside a 3060 in the first slot is CUDA's 0 and NVML's 1.
        """
        if not self._start_nvml():
            return None
        nvml = self._nvml
        assert nvml is not None
        try:
            handle = self._handle(ordinal, name)
            total, free, _used = nvml.memory(handle)
            name = nvml.name(handle)
            try:
                mine = nvml.process_memory(handle).get(self._pid)
            except Exception:  # noqa: BLE001 - per-process figures are optional (no permission, WDDM)
                mine = None
        except Exception as exc:  # noqa: BLE001 - a report without this GPU beats no report
            log.warning("cannot read GPU %d: %s", ordinal, describe_nvml_error(exc))
            return None
        return DeviceUsage(f"cuda:{ordinal}", name, mine, int(free), int(total))

    def close(self) -> None:
        if self._nvml_ready and self._nvml is not None:
            try:
                self._nvml.shutdown()
            except Exception:  # noqa: BLE001 - nothing to do about it at exit
                pass
        self._nvml_ready = None
        self._handles.clear()
        self._indices.clear()

    def _start_nvml(self) -> bool:
        if self._nvml_ready is None:
            try:
                if self._nvml is None:
                    self._nvml = Pynvml.load()
                self._nvml.init()
                self._nvml_ready = True
            except Exception as exc:  # noqa: BLE001 - ImportError or any NVML failure: no GPU figures
                log.info("no GPU memory figures: %s", describe_nvml_error(exc))
                self._nvml_ready = False
        return self._nvml_ready

    def _handle(self, ordinal: int, name: str | None = None) -> object:
        if ordinal not in self._handles:
            nvml = self._nvml
            assert nvml is not None
            index = nvml_index(ordinal, nvml)
            if name and nvml.name(nvml.device(index)) != name:
                taken = set(self._indices.values())
                index = next((i for i in range(nvml.device_count())
                              if i not in taken and nvml.name(nvml.device(i)) == name), index)
            self._indices[ordinal] = index
            self._handles[ordinal] = nvml.device(index)
        return self._handles[ordinal]


def nvml_index(ordinal: int, nvml: NvmlApi, visible: str | None = None) -> int:
    """NVML's index of the GPU that CUDA calls `ordinal` in this process.

    CUDA numbers only the devices in CUDA_VISIBLE_DEVICES, in that order (indices or UUIDs);
    NVML always numbers every device. Without the variable both count the same way (Tailor
    does not change CUDA_DEVICE_ORDER; with PCI_BUS_ID ordering, both agree too).
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if not visible:
        return ordinal
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if ordinal >= len(entries):
        return ordinal
    entry = entries[ordinal]
    if entry.isdigit():
        return int(entry)
    for index in range(nvml.device_count()):  # a UUID (or its prefix), as nvidia-smi -L prints it
        if nvml.uuid(nvml.device(index)).startswith(entry):
            return index
    return ordinal


def build_report(
    parts: Mapping[str, Mapping[str, int]],
    meter: DeviceMeter,
    kv_used: int,
    kv_total: int,
    prefix_ram_bytes: int = 0,
    prefix_disk_bytes: int = 0,
    gpu_names: Mapping[str, str] | None = None,
) -> MemoryReport:
    """A MemoryReport from a backend's parts per device and what the OS and driver say.

    Args:
        parts: per device ("cpu", "cuda:N"), bytes of "weights", "kv" (allocated) and "compute", and
            "draft" (a draft model's own buffers, all three), "projector" (a multimodal projector's weights
            and compute buffer).
        meter: reads the process's use and the free memory of each device.
        kv_used: KV cells holding tokens (shared prefixes once); kv_total: cells allocated.
        prefix_ram_bytes / prefix_disk_bytes: the prefix cache's tiers.
        gpu_names: per "cuda:N", the card's name as CUDA gives it, to find NVML's card (DeviceMeter.gpu).
    """
    devices = []
    for device, p in parts.items():
        weights, kv, compute, draft = p.get("weights", 0), p.get("kv", 0), p.get("compute", 0), p.get("draft", 0)
        projector = p.get("projector", 0)
        prefix = prefix_ram_bytes if device == "cpu" else 0
        if device == "cpu":
            usage = meter.host()
        elif device.startswith("cuda:"):
            usage = meter.gpu(int(device.partition(":")[2]), (gpu_names or {}).get(device))
        else:
            usage = None  # a backend NVML cannot see (Vulkan, Metal): our parts only
        ours = weights + kv + compute + prefix + draft + projector
        process = usage.process_bytes if usage is not None else None
        devices.append(
            DeviceMemory(
                device=device,
                weights_bytes=weights,
                kv_allocated_bytes=kv,
                kv_used_bytes=kv * min(kv_used, kv_total) // kv_total if kv_total else 0,
                compute_bytes=compute,
                other_bytes=max(0, process - ours) if process is not None else 0,
                free_bytes=usage.free_bytes if usage is not None else 0,
                total_bytes=usage.total_bytes if usage is not None else ours,
                kv_used_tokens=min(kv_used, kv_total) if kv else 0,
                kv_total_tokens=kv_total if kv else 0,
                prefix_cache_bytes=prefix,
                draft_bytes=draft,
                projector_bytes=projector,
                name=usage.name if usage is not None else device,
            )
        )
    return MemoryReport(tuple(devices), kv_used, kv_total, prefix_disk_bytes)

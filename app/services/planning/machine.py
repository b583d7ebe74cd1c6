"""This machine as the planner must see it: NVML's GPUs and what the installed llama.cpp can use of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from engine.device_probe import gpu_backend_installed, probe_llama_devices
from models.hardware.backend_devices import LlamaDevices
from models.hardware.profile import HardwareProfile, NvmlApi, detect_hardware


def detect_machine(
    nvml: NvmlApi | None = None,
    probe: Callable[[], LlamaDevices] = probe_llama_devices,
    always_probe: bool = False,
) -> HardwareProfile:
    """The hardware profile with llama.cpp's own device list in `llama`.

    llama.cpp is asked (a child process, about half a second) only where its answer can change the
    plan: NVML sees a GPU, or llama-cpp-python holds a GPU backend (Metal, Vulkan, ROCm, ...).
    Elsewhere every plan is a CPU plan and `llama` stays None, unless `always_probe` (`tailor hw`).
    """
    profile = detect_hardware(nvml)
    if always_probe or profile.has_gpu or gpu_backend_installed():
        return replace(profile, llama=probe())
    return profile

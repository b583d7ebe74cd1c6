"""The NVIDIA GPUs a working driver reports, and the newest CUDA it runs: NVML first, then nvidia-smi."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    compute_capability: str  # "8.9"
    driver: str  # "550.54.15"

    @property
    def arch(self) -> str:
        return self.compute_capability.replace(".", "")


@dataclass(frozen=True, slots=True)
class Machine:
    gpus: tuple[Gpu, ...]
    driver_cuda: tuple[int, int] | None  # the newest CUDA the driver runs, e.g. (12, 4)
    source: str  # "nvml", "nvidia-smi" or why none was found


def _nvml_machine() -> Machine | None:
    try:
        import pynvml  # nvidia-ml-py, once the venv has it
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure means: no usable driver here
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        version = pynvml.nvmlSystemGetCudaDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(Gpu(name.decode() if isinstance(name, bytes) else name, f"{major}.{minor}", driver))
        return Machine(tuple(gpus), (version // 1000, version % 1000 // 10), "nvml")
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _smi_machine() -> Machine | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        listing = subprocess.run(
            [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
        header = subprocess.run([smi], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    gpus = []
    for row in csv.reader(io.StringIO(listing.stdout)):
        if len(row) == 3 and re.fullmatch(r"\d+\.\d+", row[1].strip()):
            gpus.append(Gpu(row[0].strip(), row[1].strip(), row[2].strip()))
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", header.stdout)
    return Machine(tuple(gpus), (int(found[1]), int(found[2])) if found else None, "nvidia-smi")


def detect(probe: str = "auto") -> Machine:
    """The NVIDIA GPUs a working driver reports: NVML first, then nvidia-smi."""
    for name, fn in (("nvml", _nvml_machine), ("nvidia-smi", _smi_machine)):
        if probe in ("auto", name):
            machine = fn()
            if machine is not None and machine.gpus:
                return machine
    return Machine((), None, "no NVIDIA driver answered (NVML, nvidia-smi)" if probe != "none" else "not probed")


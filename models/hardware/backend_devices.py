"""The devices the installed llama.cpp can really run on, as its own device list (ggml) reports them.

NVML says which NVIDIA GPUs the machine has; only llama.cpp can say whether it was built to use
them (a CPU-only build sees none) or sees GPUs NVML does not (Metal, Vulkan, ROCm builds). The engine
side reads this list (`engine.gguf.devices`); the plan and `tailor hw` take it as data from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024**3
# ggml's `enum ggml_backend_dev_type`, in its order.
DEVICE_KINDS = ("cpu", "gpu", "igpu", "accel")


@dataclass(frozen=True, slots=True)
class BackendDevice:
    """One device of ggml's list: `name` is ggml's ("CUDA0", "Vulkan0", "CPU"), `description` the hardware's."""

    name: str
    description: str
    kind: str  # one of DEVICE_KINDS
    free_bytes: int
    total_bytes: int

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("gpu", "igpu")

    @property
    def is_cuda(self) -> bool:
        return self.name.upper().startswith("CUDA")


@dataclass(frozen=True, slots=True)
class LlamaDevices:
    """What llama.cpp here can offload to.

    `gpu_offload` is `llama_supports_gpu_offload()`; `devices` ggml's list (the CPU included);
    `backends` the backends compiled in or loaded ("CPU", "CUDA", ...), which a backend with no usable
    device still lists; `cuda_problem` why a CUDA build offers no CUDA device here (its backend did not
    load: no driver; the driver is too old; CUDA_VISIBLE_DEVICES hides the GPUs), as ggml's own
    failure says it; `error` says why the list could not be read (then nothing is known).
    `cpu_features` are the CPU backend's, as `llama_print_system_info()` lists them ("AVX2", "REPACK").
    """

    gpu_offload: bool
    devices: tuple[BackendDevice, ...]
    backends: tuple[str, ...] = ()
    cuda_problem: str | None = None
    error: str | None = None
    cpu_features: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.error is None

    @property
    def gpus(self) -> tuple[BackendDevice, ...]:
        return tuple(d for d in self.devices if d.is_gpu)

    @property
    def cuda(self) -> bool:
        """llama.cpp here offloads to at least one CUDA device."""
        return self.gpu_offload and any(d.is_cuda for d in self.gpus)

    @property
    def has_cuda_backend(self) -> bool:
        """Built with CUDA, whether or not it found a GPU it can use."""
        return (self.cuda_problem is not None or any(b.upper() == "CUDA" for b in self.backends)
                or any(d.is_cuda for d in self.devices))

    def summary(self) -> str:
        """One line: 'CUDA0 (NVIDIA GeForce RTX 4090, 23.5 of 24.0 GiB free), CPU (AMD EPYC)'."""
        if not self.known:
            return self.error or "unknown"
        parts = [
            f"{d.name} ({d.description}, {d.free_bytes / GIB:.1f} of {d.total_bytes / GIB:.1f} GiB free)"
            if d.is_gpu else f"{d.name} ({d.description})"
            for d in self.devices
        ]
        return ", ".join(parts) + ("" if self.gpu_offload else "; built without GPU offload")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_offload": self.gpu_offload,
            "devices": [{name: getattr(d, name) for name in d.__slots__} for d in self.devices],
            "backends": list(self.backends),
            "cuda_problem": self.cuda_problem,
            "error": self.error,
            "cpu_features": list(self.cpu_features),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LlamaDevices:
        return cls(
            gpu_offload=bool(data["gpu_offload"]),
            devices=tuple(
                BackendDevice(str(d["name"]), str(d["description"]), str(d["kind"]), int(d["free_bytes"]),
                              int(d["total_bytes"]))
                for d in data["devices"]
            ),
            backends=tuple(str(b) for b in data.get("backends", ())),
            cuda_problem=data.get("cuda_problem"),
            error=data.get("error"),
            cpu_features=tuple(str(f) for f in data.get("cpu_features", ())),
        )


def unknown_devices(why: str) -> LlamaDevices:
    """The answer when llama.cpp could not be asked (not installed, the probe failed or hung)."""
    return LlamaDevices(gpu_offload=False, devices=(), error=why)

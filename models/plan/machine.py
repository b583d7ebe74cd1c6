"""The hardware a plan is made for: `Machine`, from the hardware profile (NVML's GPUs, llama.cpp's devices)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from models.hardware.gpu_cards import GpuCard, cards_label, cuda_cards, ggml_cards, nvml_cards
from models.hardware.gpu_catalog import find_gpu
from models.plan.cpu_repack import cpu_repack_of
from models.units import gb


@dataclass(slots=True, frozen=True)
class Machine:
    """What the plan needs of the hardware profile.

    `gpus` are every GPU llama.cpp can put layers on, in its order (the i-th is `cuda:i`); GGUF
    layers are split over all of them. The single-GPU fields describe the first, which is also the
    one the PyTorch engine runs on; a machine made with them alone has that one card in `gpus`.
    `gguf_gpu` says whether llama.cpp here can offload to the GPUs (the PyTorch engine reaches them
    through torch either way); `gpu_note`, when set, is the first reason of every plan: why
    llama.cpp cannot use the GPU, or which of llama.cpp's devices stand in for NVML's.
    """

    gpu_name: str | None
    gpu_free_bytes: int
    gpu_total_bytes: int
    compute_capability: tuple[int, int] | None
    ram_available_bytes: int
    gguf_gpu: bool = True
    gpu_note: str | None = None
    # ggml types llama.cpp's CPU backend here repacks into a second copy (models/plan/cpu_repack.py).
    cpu_repack: frozenset[int] = frozenset()
    gpus: tuple[GpuCard, ...] = ()

    def __post_init__(self) -> None:
        # The single-GPU fields are the first card: a machine made (or `replace`d) with them has it so.
        if not self.has_gpu:
            object.__setattr__(self, "gpus", ())
            return
        first = GpuCard(self.gpu_name, self.gpu_free_bytes, self.gpu_total_bytes, self.compute_capability)
        if self.gpus[:1] != (first,):
            object.__setattr__(self, "gpus", (first, *self.gpus[1:]))

    @classmethod
    def with_gpus(cls, gpus: tuple[GpuCard, ...], ram_available_bytes: int, **kw) -> Machine:  # noqa: ANN003
        """A machine with these GPUs (llama.cpp's order; none: a CPU machine); `kw` are the other fields."""
        if not gpus:
            return cls(None, 0, 0, None, ram_available_bytes, **kw)
        g = gpus[0]
        return cls(g.name, g.free_bytes, g.total_bytes, g.compute_capability, ram_available_bytes, gpus=gpus, **kw)

    @property
    def has_gpu(self) -> bool:
        return self.gpu_name is not None and self.gpu_total_bytes > 0

    @property
    def gpu_label(self) -> str:
        """The GPUs in a few words: the name of one, '2x NVIDIA GeForce RTX 4090', 'A + B'."""
        return cards_label(self.gpus) if self.gpus else "no GPU"

    @property
    def gpus_free_bytes(self) -> int:
        """Free memory of all the GPUs together (what a GGUF model split over them can use)."""
        return sum(g.free_bytes for g in self.gpus)

    @property
    def gguf_on_gpu(self) -> bool:
        """GGUF layers can go to the GPU."""
        return self.has_gpu and self.gguf_gpu

    @property
    def is_datacenter(self) -> bool:
        card = find_gpu(self.gpu_name) if self.gpu_name else None
        return bool(card and card.is_datacenter)

    def without(self, used: Mapping[str, int]) -> Machine:
        """This machine with `used` bytes per device ("cpu", "cuda:0"...) taken already: what is left for one
        more model beside others planned on it (a server keeping several loaded)."""
        if not used:
            return self
        gpus = tuple(replace(card, free_bytes=max(0, card.free_bytes - used.get(f"cuda:{i}", 0)))
                     for i, card in enumerate(self.gpus))
        ram = max(0, self.ram_available_bytes - used.get("cpu", 0))
        if not gpus:
            return replace(self, ram_available_bytes=ram)
        first = gpus[0]
        return replace(self, gpu_free_bytes=first.free_bytes, ram_available_bytes=ram, gpus=gpus)

    @classmethod
    def from_profile(cls, profile) -> Machine:  # noqa: ANN001 - models.hardware.profile.HardwareProfile
        return replace(cls._gpus_from_profile(profile), cpu_repack=cpu_repack_of(profile.llama))

    @classmethod
    def _gpus_from_profile(cls, profile) -> Machine:  # noqa: ANN001 - models.hardware.profile.HardwareProfile
        nvml = nvml_cards(profile.gpus)
        ram = profile.ram_available_bytes
        llama = profile.llama
        if llama is not None and not llama.known and nvml:
            note = f"{llama.error}: planning with the GPU{'s' if len(nvml) > 1 else ''} NVML reports."
            return cls.with_gpus(nvml, ram, gpu_note=note)
        if llama is None or not llama.known:
            return cls.with_gpus(nvml, ram)
        if nvml and llama.cuda:
            return cls.with_gpus(cuda_cards(llama.gpus, profile.gpus), ram)
        ggml = ggml_cards(llama.gpus, profile.gpus) if llama.gpu_offload else ()
        if ggml:
            # A Metal, Vulkan or ROCm build, or a GPU NVML cannot read: plan with what ggml reports.
            devices = [d for d in llama.gpus if (d.description or d.name) in {c.name for c in ggml}]
            if len(ggml) == 1:
                d = devices[0]
                note = (f"GPU: {d.description or d.name} through llama.cpp's {d.name} device; planning with the "
                        f"{gb(d.free_bytes)} free that it reports.")
            else:
                note = (f"GPUs: {cards_label(ggml)} through llama.cpp's {', '.join(d.name for d in devices)} "
                        f"devices; planning with the {gb(sum(c.free_bytes for c in ggml))} free that they report.")
            return cls.with_gpus(ggml, ram, gpu_note=note)
        if not nvml:
            return cls.with_gpus((), ram)
        return cls.with_gpus(nvml, ram, gguf_gpu=False, gpu_note=no_offload_reason(llama, cards_label(nvml)))


def no_offload_reason(llama, gpu_name: str) -> str:  # noqa: ANN001 - models.hardware.backend_devices.LlamaDevices
    """Why llama.cpp here runs everything on the CPU although NVML sees `gpu_name`, and what to do."""
    if not llama.has_cuda_backend:
        return f"llama.cpp here was built without CUDA: run `make gpu` to use your {gpu_name}."
    if llama.cuda_problem:
        return f"llama.cpp has CUDA but {llama.cuda_problem}: your {gpu_name} is not used, the model runs on the CPU."
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and not hidden.strip():
        return (f"llama.cpp has CUDA but CUDA_VISIBLE_DEVICES is empty, which hides your {gpu_name}: "
                "running on the CPU.")
    return (f"llama.cpp has CUDA but cannot use your {gpu_name} (the NVIDIA driver may be too old for this "
            "build, or the GPU was reset): running on the CPU. Update the driver, or rebuild with `make gpu`.")

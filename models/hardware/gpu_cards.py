"""The GPUs a plan may put layers on, in the order llama.cpp numbers them, with the memory NVML reports.

llama.cpp splits a model over every GPU of its device list (CUDA0, CUDA1, ...: CUDA's own numbering),
and its `tensor_split` gives each of them a share in that order. NVML numbers the cards by PCI bus,
CUDA by default fastest first, and CUDA_VISIBLE_DEVICES hides and reorders them: so each of
llama.cpp's CUDA devices is paired with NVML's card of the same name (and position), whose free
memory is read without the CUDA context the device probe itself held.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from models.hardware.backend_devices import BackendDevice
from models.hardware.profile import GpuInfo


@dataclass(slots=True, frozen=True)
class GpuCard:
    """One GPU of a plan; the i-th card of a machine is `cuda:i` in forecasts and memory reports."""

    name: str
    free_bytes: int
    total_bytes: int
    compute_capability: tuple[int, int] | None = None


def card_of(gpu: GpuInfo) -> GpuCard:
    return GpuCard(gpu.name, gpu.free_bytes, gpu.total_bytes, gpu.compute_capability)


def nvml_cards(gpus: Sequence[GpuInfo]) -> tuple[GpuCard, ...]:
    """NVML's GPUs in its own order (a machine whose llama.cpp was not asked, or a hypothetical one)."""
    return tuple(card_of(g) for g in sorted(gpus, key=lambda g: g.index))


def cuda_order(gpus: Sequence[GpuInfo], visible: str | None = None) -> list[GpuInfo]:
    """NVML's GPUs in the order CUDA_VISIBLE_DEVICES (indices or UUIDs) lists them; all, by index, without it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    by_index = sorted(gpus, key=lambda g: g.index)
    if not visible or not visible.strip():
        return by_index
    order: list[GpuInfo] = []
    for entry in (e.strip() for e in visible.split(",")):
        match = next((g for g in by_index if (str(g.index) == entry if entry.isdigit()
                                                else bool(g.uuid) and g.uuid.startswith(entry))), None)
        if match is not None and match not in order:
            order.append(match)
    return order


def cuda_cards(devices: Sequence[BackendDevice], gpus: Sequence[GpuInfo], visible: str | None = None
               ) -> tuple[GpuCard, ...]:
    """llama.cpp's CUDA devices in its order, each with NVML's figures for the same card (else ggml's own).

    The card at the same position in CUDA's numbering is taken when its name matches (always, for
    identical cards); otherwise the first card left of that name, so a mixed pair that CUDA orders
    fastest first still gets each card's own memory.
    """
    order = cuda_order(gpus, visible)
    left = list(order)
    cards = []
    for i, d in enumerate(x for x in devices if x.is_cuda):
        at = order[i] if i < len(order) and order[i] in left else None
        same = [g for g in left if g.name == d.description]
        g = at if at is not None and (at.name == d.description or not same) else (same[0] if same else None)
        if g is None:
            cards.append(GpuCard(d.description or d.name, d.free_bytes, d.total_bytes))
        else:
            left.remove(g)
            cards.append(card_of(g))
    return tuple(cards)


def ggml_cards(devices: Sequence[BackendDevice], gpus: Sequence[GpuInfo]) -> tuple[GpuCard, ...]:
    """GPUs only ggml reports (a Vulkan, Metal or ROCm build): the discrete ones (integrated ones when
    there is none, as llama.cpp picks them), with ggml's own figures; compute capability from NVML's
    card of the same name, else of the same position."""
    chosen = [d for d in devices if d.kind == "gpu"] or [d for d in devices if d.kind == "igpu"]
    nvml = sorted(gpus, key=lambda g: g.index)
    by_name = {g.name: g.compute_capability for g in nvml}
    return tuple(
        GpuCard(d.description or d.name, d.free_bytes, d.total_bytes,
                by_name.get(d.description) or (nvml[i].compute_capability if i < len(nvml) else None))
        for i, d in enumerate(chosen)
    )


def cards_label(cards: Sequence[GpuCard]) -> str:
    """'NVIDIA GeForce RTX 4090', '2x NVIDIA GeForce RTX 4090' or 'NVIDIA GeForce RTX 4090 + NVIDIA GeForce RTX 3060'."""
    names = [c.name for c in cards]
    if len(set(names)) == 1 and len(names) > 1:
        return f"{len(names)}x {names[0]}"
    return " + ".join(names)

"""How much room a plan leaves on each device: its forecast beside the free memory and the plan's limit. No Qt.

The forecast says what a file takes per device (weights, KV cache, compute); the decision tree
compares it with a budget per device: the free memory less a reserve and a margin
(models/plan/budget.py). The Models window draws the two side by side and its Why? dialog
prints them, so they come from one place: here.

    rooms = device_rooms(plan, machine)
    text = format_rooms(rooms)
"""

from __future__ import annotations

from dataclasses import dataclass

from models.plan.budget import GPU_RESERVE_BYTES, RAM_RESERVE_BYTES, SAFETY_MARGIN, Budget
from models.plan.decision_tree import Plan
from models.plan.machine import Machine
from models.units import GIB


@dataclass(slots=True, frozen=True)
class DeviceRoom:
    """One device of a plan's forecast, with the memory it has.

    Attributes:
        device: The forecast's name for it, as `tailor plan` prints it ("cuda:0", "cpu").
        label: A short name for a bar: "GPU", "GPU 1" (several cards), "CPU".
        card: The GPU's name, or None for the CPU.
        free_bytes: Free memory now: the card's (NVML), or the RAM available.
        limit_bytes: What the plan may use of it: the free memory less the reserve and the margin.
    """

    device: str
    label: str
    card: str | None
    weights_bytes: int
    kv_cache_bytes: int
    compute_bytes: int
    other_bytes: int
    free_bytes: int
    limit_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.compute_bytes + self.other_bytes

    @property
    def left_bytes(self) -> int:
        """Room left under the plan's limit; negative: this much over it."""
        return self.limit_bytes - self.total_bytes


def device_rooms(plan: Plan, machine: Machine) -> tuple[DeviceRoom, ...]:
    """The plan's forecast per device, GPUs first (in llama.cpp's order), then the CPU; empty without one."""
    if plan.forecast is None:
        return ()
    budget = Budget(machine, max(1, plan.context), plan.kv_type)
    several = len(machine.gpus) > 1
    rooms = []
    for device, d in plan.forecast.devices.items():
        if device == "cpu":
            label, card, free, limit = "CPU", None, machine.ram_available_bytes, budget.ram_budget
        else:
            index = _gpu_index(device)
            gpu = machine.gpus[index] if index is not None and index < len(machine.gpus) else None
            # A device the machine does not have (a plan made for another one) has no room at all.
            label = f"GPU {index}" if several else "GPU"
            card, free = (gpu.name, gpu.free_bytes) if gpu else (None, 0)
            limit = budget.gpu_budgets.get(device, 0)
        rooms.append(DeviceRoom(device, label, card, d.weights_bytes, d.kv_cache_bytes, d.compute_bytes,
                                d.overhead_bytes, free, limit))
    return tuple(sorted(rooms, key=lambda r: (r.device == "cpu", r.device)))


def _gpu_index(device: str) -> int | None:
    tail = device.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def gib(nbytes: int) -> str:
    return f"{nbytes / GIB:.2f} GiB"


def room_line(room: DeviceRoom) -> str:
    """One device in words: the parts, the free memory, the limit, and what is left (or over)."""
    where = f"{room.label} ({room.device}{', ' + room.card if room.card else ''})"
    parts = f"weights {gib(room.weights_bytes)} + KV cache {gib(room.kv_cache_bytes)} + compute " \
            f"{gib(room.compute_bytes)}" + (f" + other {gib(room.other_bytes)}" if room.other_bytes else "")
    left = f"{gib(room.left_bytes)} left" if room.left_bytes >= 0 else f"{gib(-room.left_bytes)} over"
    return (f"{where}: {parts} = {gib(room.total_bytes)}, of {gib(room.free_bytes)} free "
            f"(the plan may use {gib(room.limit_bytes)}): {left}")


def format_rooms(rooms: tuple[DeviceRoom, ...]) -> str:
    """The rooms as a block of text under `format_plan`'s (the Models window's Why? dialog)."""
    if not rooms:
        return ""
    lines = [f"Room on each device (the plan may use the free memory less a reserve, {gib(GPU_RESERVE_BYTES)} "
             f"on a GPU and {gib(RAM_RESERVE_BYTES)} of RAM, and a {SAFETY_MARGIN:.0%} margin):"]
    return "\n".join(lines + [f"  {room_line(r)}" for r in rooms])

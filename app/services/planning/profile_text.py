"""A hardware profile in a few lines of plain text: what `tailor hw` prints and the welcome shows."""

from __future__ import annotations

from models.hardware.profile import GIB, HardwareProfile
from models.plan.machine import Machine


def format_profile(profile: HardwareProfile) -> str:
    """The profile in a few lines of plain text."""
    lines = []
    for gpu in profile.gpus:
        line = f"GPU {gpu.index}: {gpu.name}, {_gib(gpu.total_bytes)} ({_gib(gpu.free_bytes)} free)"
        if gpu.used_by_others_bytes:
            line += f", {_gib(gpu.used_by_others_bytes)} used by other processes"
        if gpu.compute_capability is not None:
            line += ", compute capability {}.{}".format(*gpu.compute_capability)
        lines.append(line)
    if profile.gpus:
        first = profile.gpus[0]
        versions = [f"driver {first.driver_version}" if first.driver_version else ""]
        versions.append(f"CUDA {first.cuda_version}" if first.cuda_version else "")
        if any(versions):
            lines.append("NVIDIA " + ", ".join(v for v in versions if v))
        if profile.source.startswith("nvml ("):
            lines.append("Note: " + profile.source.removeprefix("nvml (").removesuffix(")"))
    else:
        reason = profile.source.removeprefix("none: ")
        lines.append(f"No NVIDIA GPU found ({reason})")
    if profile.llama is not None:
        lines.append(f"llama.cpp devices: {profile.llama.summary()}")
        note = Machine.from_profile(profile).gpu_note
        if note:
            lines.append(f"Note: {note}")
    lines.append(f"RAM: {_gib(profile.ram_total_bytes)} ({_gib(profile.ram_available_bytes)} available)")
    lines.append(
        f"CPU: {profile.cpu_name}, {profile.cpu_physical_cores} cores, {profile.cpu_logical_cores} threads"
    )
    return "\n".join(lines)


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / GIB:.1f} GiB"

"""A first download to suggest for this machine, from a short curated list of well-known GGUF repos. No Qt.

The sizes below are approximate (the Q4_K_M file as the hub lists it, in decimal GB, rounded); they
only choose which repo to suggest. The real plan is made from the repo's own files when its page is
opened in the Models window (forecast per file, the decision tree's pick, the reasons).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from models.hardware.profile import GIB, HardwareProfile
from models.plan.machine import Machine

GB = 1000**3
MARGIN_BYTES = 1 * GIB  # room for the KV cache at a modest context and the compute buffers
RAM_RESERVED_BYTES = 4 * GIB  # what the desktop, the browser and Tailor itself keep on a CPU-only machine
# On the CPU, speed is bound by memory bandwidth: past ~8B parameters replies come at a word or two a second.
CPU_MAX_PARAMS_B = 8.0


@dataclass(frozen=True, slots=True)
class Pick:
    """One suggested repo; `reason` is set by `recommend` (one line, for the welcome screen)."""

    repo_id: str
    name: str
    params_b: float  # billions of parameters
    q4_k_m_gb: float  # approximate size of the Q4_K_M file, decimal GB
    reason: str = ""

    @property
    def q4_k_m_bytes(self) -> int:
        return int(self.q4_k_m_gb * GB)


# Ordered by size; among models of one size the first listed wins.
STARTER_PICKS: tuple[Pick, ...] = (
    Pick("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "Qwen2.5 0.5B Instruct", 0.5, 0.49),
    Pick("bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama 3.2 1B Instruct", 1.2, 0.81),
    Pick("Qwen/Qwen2.5-1.5B-Instruct-GGUF", "Qwen2.5 1.5B Instruct", 1.5, 1.12),
    Pick("Qwen/Qwen2.5-3B-Instruct-GGUF", "Qwen2.5 3B Instruct", 3.1, 2.10),
    Pick("bartowski/Llama-3.2-3B-Instruct-GGUF", "Llama 3.2 3B Instruct", 3.2, 2.02),
    Pick("bartowski/Mistral-7B-Instruct-v0.3-GGUF", "Mistral 7B Instruct v0.3", 7.2, 4.37),
    Pick("Qwen/Qwen2.5-7B-Instruct-GGUF", "Qwen2.5 7B Instruct", 7.6, 4.68),
    Pick("Qwen/Qwen2.5-14B-Instruct-GGUF", "Qwen2.5 14B Instruct", 14.8, 8.99),
    Pick("Qwen/Qwen2.5-32B-Instruct-GGUF", "Qwen2.5 32B Instruct", 32.8, 19.85),
)


def recommend(profile: HardwareProfile, picks: tuple[Pick, ...] = STARTER_PICKS) -> Pick:
    """The largest pick whose Q4_K_M file plus ~1 GiB fits this machine, with the reason; else the smallest.

    With GPUs that llama.cpp here can use, the budget is their free memory together; without,
    the available RAM less 4 GiB, and models above ~8B parameters are left out (too slow on a CPU).
    """
    machine = Machine.from_profile(profile)  # the GPU llama.cpp here can use, if any
    if machine.gguf_on_gpu:
        # A GGUF model is split over every GPU llama.cpp can use: their free memory together.
        budget, where = machine.gpus_free_bytes, f"{_gib(machine.gpus_free_bytes)} free on the {machine.gpu_label}"
        candidates = picks
    else:
        budget = max(0, profile.ram_available_bytes - RAM_RESERVED_BYTES)
        why_cpu = machine.gpu_note.rstrip(".") if machine.gpu_note else "no NVIDIA GPU, so it runs on the CPU"
        where = f"{_gib(budget)} of RAM to spare ({why_cpu})"
        candidates = tuple(p for p in picks if p.params_b <= CPU_MAX_PARAMS_B) or picks
    fitting = [p for p in candidates if p.q4_k_m_bytes + MARGIN_BYTES <= budget]
    if not fitting:
        smallest = min(picks, key=lambda p: p.params_b)
        return replace(smallest, reason=(
            f"The smallest of the usual picks: even its ~{smallest.q4_k_m_gb:.1f} GB Q4_K_M file is tight "
            f"with {where}."))
    best = max(fitting, key=lambda p: p.params_b)  # max keeps the first of equal sizes
    reason = f"The largest of the usual picks whose ~{best.q4_k_m_gb:.1f} GB Q4_K_M file fits with {where}"
    if not machine.gguf_on_gpu and any(p.params_b > CPU_MAX_PARAMS_B for p in picks):
        reason += "; larger models answer too slowly on a CPU"
    return replace(best, reason=reason + ".")


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / GIB:.1f} GiB"

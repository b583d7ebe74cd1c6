"""When the plan's GPU layers cannot be had at load time: the GPU is gone, or its memory is taken.

The plan is made from NVML's free memory a moment before the load; another program can take that
memory meanwhile, or the driver can reset. llama.cpp then fails the load (or finds no GPU). The model
still fits in RAM in most such cases, so the load is tried again with fewer layers on the GPU, down
to none, and the user is told in one line what happened instead of getting an error.
"""

from __future__ import annotations

from collections.abc import Iterable

# What llama.cpp and ggml-cuda log when a device buffer cannot be had.
OUT_OF_MEMORY_MARKERS = ("out of memory", "failed to allocate", "unable to allocate", "cudamalloc")


def layer_attempts(planned: int, gpu_usable: bool) -> list[int]:
    """The GPU layer counts to try in order: the plan's, half of it, then none."""
    if planned <= 0 or not gpu_usable:
        return [0]
    return list(dict.fromkeys((planned, planned // 2, 0)))


def is_out_of_memory(errors: Iterable[str]) -> bool:
    return any(marker in line.lower() for line in errors for marker in OUT_OF_MEMORY_MARKERS)


def next_attempt(attempts: list[int], failed: int, out_of_memory: bool) -> int | None:
    """After a load with `failed` GPU layers failed: the next count to try, or None to give up.

    Out of memory, fewer layers may fit; any other failure with layers on the GPU is tried once on
    the CPU alone (a GPU that fails while the model loads); a CPU load that fails is the file's fault.
    """
    later = attempts[attempts.index(failed) + 1:]
    if not later:
        return None
    return later[0] if out_of_memory else 0


def fallback_notice(planned: int, used: int, gpu_usable: bool, why: str = "") -> str | None:
    """One line for the user when the model did not load as planned; None when it did."""
    if used == planned:
        return None
    if not gpu_usable:
        return (f"The plan put {planned} layers on the GPU, but llama.cpp finds no GPU it can use now (the driver "
                "was reset, or CUDA_VISIBLE_DEVICES hides it): the model runs on the CPU, slower.")
    if why == "out of memory":
        return (f"Out of GPU memory with {planned} layers on the GPU (another program may have taken it): "
                f"loaded with {used} on the GPU instead, slower.")
    return (f"llama.cpp could not load the model with {planned} layers on the GPU ({why}): "
            f"loaded with {used} on the GPU instead, slower.")

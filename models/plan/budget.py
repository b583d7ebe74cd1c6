"""What a plan may use of a machine, and whether a candidate's memory forecast stays within it.

`Budget` is the arithmetic under the decision tree (models/plan/decision_tree.py): each GPU's budget and the
RAM's, the forecast settings a candidate runs with, and the GPUs in the tree's words.
"""

from __future__ import annotations

from dataclasses import replace

from models.plan.candidates import Candidate
from models.plan.context import largest_fitting_context
from models.plan.forecast import Forecast, ForecastSettings, forecast
from models.plan.layer_split import layer_devices, layer_ranges, shares_of
from models.plan.machine import Machine
from models.units import GIB, gb

# Kept free on a GPU for the driver, the desktop and CUDA's own context.
GPU_RESERVE_BYTES = int(0.6 * GIB)
# Forecasts are within a few percent; plan with a margin on top.
SAFETY_MARGIN = 0.05
# Kept free in RAM for the OS, the window and everything else the user runs.
RAM_RESERVE_BYTES = 2 * GIB
# Tokens per KV block of the PyTorch engine's paged cache.
PAGED_BLOCK_SIZE = 16


def card_budget(free_bytes: int) -> int:
    """What a plan may use of a GPU with `free_bytes` free: less the reserve, with the margin."""
    return int(max(0, free_bytes - GPU_RESERVE_BYTES) * (1 - SAFETY_MARGIN))


class Budget:
    """The budgets of one machine at one context and KV cache type; the tree walks on top of it."""

    def __init__(self, machine: Machine, context: int, kv_type: str, flash_attn: bool = True):
        self.m, self.context, self.kv_type, self.flash_attn = machine, context, kv_type, flash_attn
        # Each card has its own budget: a model split over several must fit on each.
        self.gpu_budgets = {f"cuda:{i}": card_budget(g.free_bytes) for i, g in enumerate(machine.gpus)}
        self.gpu_budget = sum(self.gpu_budgets.values())
        # Layers in proportion to each card's free memory, passed to llama.cpp as is.
        self.tensor_split = shares_of([g.free_bytes for g in machine.gpus]) if machine.gguf_gpu else ()
        self.ram_budget = int(max(0, machine.ram_available_bytes - RAM_RESERVE_BYTES) * (1 - SAFETY_MARGIN))

    def settings(self, c: Candidate, n_gpu_layers: int, context: int | None = None, kv: str | None = None):
        if c.format != "gguf":
            # The PyTorch engine: an f16 KV cache in blocks of PAGED_BLOCK_SIZE tokens.
            return ForecastSettings(n_ctx=context or self.context, kv_type="f16", n_gpu_layers=n_gpu_layers,
                                    paged_block_size=PAGED_BLOCK_SIZE)
        n_ctx = context or self.context
        s = ForecastSettings(
            n_ctx=n_ctx, kv_type=kv or self.kv_type, flash_attn=self.flash_attn,
            n_gpu_layers=n_gpu_layers, repack_types=self.m.cpu_repack, tensor_split=self.tensor_split,
        )
        if c.shape.embedding:  # the whole context in one ubatch: an input is pooled whole
            s = replace(s, n_batch=n_ctx, n_ubatch=n_ctx)
        # Sliding-window layers: llama.cpp's full-size cache keeps every prefix reusable; only
        # when it does not fit do they keep just their window (see Plan.swa_full).
        if any(c.shape.swa_layers) and c.shape.sliding_window and not self.fits(forecast(c.shape, s)):
            windowed = replace(s, swa_full=False)
            if self.fits(forecast(c.shape, windowed)):
                return windowed
        return s

    def fits(self, f: Forecast) -> bool:
        """Every GPU's part within that card's budget, and the host's within the RAM budget."""
        return all(d.total_bytes <= (self.ram_budget if name == "cpu" else self.gpu_budgets.get(name, 0))
                   for name, d in f.devices.items())

    def largest_context(self, c: Candidate, n_gpu_layers: int) -> int:
        """The largest context at which `c` with `n_gpu_layers` on the GPU passes fits()."""
        return largest_fitting_context(
            lambda n: self.fits(forecast(c.shape, self.settings(c, n_gpu_layers, n))), c.shape.n_ctx_train)

    def gpus_reason(self) -> str:
        """The first GPU reason: the cards, their free memory, the budget and (several) the split."""
        m = self.m
        ccs = list(dict.fromkeys(".".join(map(str, g.compute_capability)) if g.compute_capability else "unknown"
                                 for g in m.gpus))
        cc = f"compute capability {' / '.join(ccs)}"
        if len(m.gpus) == 1:
            return (f"GPU: {m.gpu_name} ({cc}), {gb(m.gpu_free_bytes)} free of {gb(m.gpu_total_bytes)}; "
                    f"planning with {gb(self.gpu_budget)} after a {gb(GPU_RESERVE_BYTES)} reserve and a "
                    f"{SAFETY_MARGIN:.0%} margin.")
        free = [g.free_bytes for g in m.gpus]
        each = "" if len(set(free)) == 1 else f" ({' + '.join(f'{n / GIB:.1f}' for n in free)} GiB)"
        text = (f"GPUs: {m.gpu_label} ({cc}), {gb(m.gpus_free_bytes)} free in all{each} of "
                f"{gb(sum(g.total_bytes for g in m.gpus))}; planning with "
                f"{' + '.join(f'{b / GIB:.1f}' for b in self.gpu_budgets.values())} GiB after a "
                f"{gb(GPU_RESERVE_BYTES)} reserve on each card and a {SAFETY_MARGIN:.0%} margin")
        if self.tensor_split:
            text += f"; layers split {'/'.join(str(round(100 * s)) for s in self.tensor_split)} by free memory"
        return text + "."

    def on_gpus(self) -> str:
        """Where GPU layers go, in words: 'the GPU', or 'the 2 GPUs'."""
        return "the GPU" if len(self.m.gpus) < 2 else f"the {len(self.m.gpus)} GPUs"

    def split_words(self, c: Candidate, n_gpu_layers: int) -> str:
        """With several GPUs, which layers each one holds: ' (cuda:0: layers 0-40; cuda:1: ...)'."""
        if len(self.tensor_split) < 2:
            return ""
        placed = layer_devices(c.shape.n_layers, n_gpu_layers, self.tensor_split)
        return " (" + "; ".join(f"cuda:{i}: {layer_ranges(placed, i)}" for i in range(len(self.tensor_split))) + ")"

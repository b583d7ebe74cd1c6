"""The quantization decision tree: which file of a repo to run on this machine, and how.

Every step taken is written into `Plan.reasons` in plain words; the GUI and `tailor plan`
show them as they are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from models.cpu_repack import cpu_repack_of
from models.forecast import KV_PADDING, Forecast, ForecastSettings, ModelShape, forecast, scaled_to
from models.gpu_cards import GpuCard, cards_label, cuda_cards, ggml_cards, nvml_cards
from models.gpu_catalog import find_gpu
from models.layer_split import layer_devices, layer_ranges, shares_of
from models.quant_levels import CPU_DEFAULT, quality_key, quant_from_name

GIB = 1024**3
# Kept free on a GPU for the driver, the desktop and CUDA's own context.
GPU_RESERVE_BYTES = int(0.6 * GIB)
# Forecasts are within a few percent; plan with a margin on top.
SAFETY_MARGIN = 0.05
# Kept free in RAM for the OS, the window and everything else the user runs.
RAM_RESERVE_BYTES = 2 * GIB
MIN_CONTEXT = 2048
# The most Context: Auto takes unless raised: past it the KV cache holds room few chats use, and a
# full window takes long to prefill on a workstation.
AUTO_CONTEXT_CAP = 32768
# Context: Auto compares a repo's files at this many tokens: on a tight GPU the best level that
# holds a real conversation beats a higher one that fits 2,048 tokens (70B on a 4090: Q2_K whole
# at 3k tokens, against a partial offload with 8k and more).
AUTO_WALK_CONTEXT = 8192
# Where the search for the largest context stops for a model whose header gives no trained length.
MAX_SEARCH_CONTEXT = 1 << 20
# Tokens per KV block of the PyTorch engine's paged cache.
PAGED_BLOCK_SIZE = 16


@dataclass(slots=True, frozen=True)
class Candidate:
    """One runnable choice in a repo: a GGUF file (or split set), or an AWQ/FP8 checkpoint."""

    format: str  # "gguf" | "awq" | "fp8"
    files: tuple[str, ...]  # a split GGUF lists every part
    quant: str | None
    size_bytes: int
    shape: ModelShape


def card_budget(free_bytes: int) -> int:
    """What a plan may use of a GPU with `free_bytes` free: less the reserve, with the margin."""
    return int(max(0, free_bytes - GPU_RESERVE_BYTES) * (1 - SAFETY_MARGIN))


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
    # ggml types llama.cpp's CPU backend here repacks into a second copy (models/cpu_repack.py).
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

    @classmethod
    def from_profile(cls, profile) -> Machine:  # noqa: ANN001 - models.hardware.HardwareProfile
        return replace(cls._gpus_from_profile(profile), cpu_repack=cpu_repack_of(profile.llama))

    @classmethod
    def _gpus_from_profile(cls, profile) -> Machine:  # noqa: ANN001 - models.hardware.HardwareProfile
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


def no_offload_reason(llama, gpu_name: str) -> str:  # noqa: ANN001 - models.backend_devices.LlamaDevices
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


@dataclass(slots=True, frozen=True)
class Plan:
    format: str
    files: tuple[str, ...]
    quant: str | None
    n_layers: int
    n_gpu_layers: int
    context: int
    kv_type: str
    flash_attn: bool
    n_batch: int
    n_ubatch: int
    fits: bool
    forecast: Forecast | None
    reasons: tuple[str, ...] = field(default_factory=tuple)
    # Why the machine's GPU is left unused by llama.cpp (a CPU-only build, a hidden or unusable GPU).
    gpu_unused_reason: str | None = None
    # The largest context (tokens) whose KV cache and compute buffer fit beside these weights with
    # these GPU layers, at most the model's trained length; 0 when not even KV_PADDING tokens fit.
    max_context: int = 0
    # llama.cpp's full-size cache for sliding-window layers; False when only the windowed one fits.
    swa_full: bool = True
    # Each GPU's share of the GPU layers (llama.cpp's tensor_split, in its device order); empty: one GPU.
    tensor_split: tuple[float, ...] = ()

    def to_dict(self) -> dict:
        return {
            "format": self.format,
            "file": self.files[0] if self.files else None,
            "files": list(self.files),
            "quant": self.quant,
            "n_layers": self.n_layers,
            "n_gpu_layers": self.n_gpu_layers,
            "context": self.context,
            "kv_type": self.kv_type,
            "flash_attn": self.flash_attn,
            "n_batch": self.n_batch,
            "n_ubatch": self.n_ubatch,
            "fits": self.fits,
            "reasons": list(self.reasons),
            "gpu_unused_reason": self.gpu_unused_reason,
            "swa_full": self.swa_full,
            "tensor_split": list(self.tensor_split),
            "max_context": self.max_context,
            "forecast": self.forecast.to_dict() if self.forecast else None,
        }


def gb(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def largest_fitting_context(fits_at: Callable[[int], bool], trained: int) -> int:
    """The largest context `fits_at` accepts: `trained` (the model's trained length; 0: unknown, searched
    up to MAX_SEARCH_CONTEXT) if it fits, else the largest multiple of KV_PADDING that does, as llama.cpp
    pads its cache to one; 0 when not even KV_PADDING tokens fit.

    The memory grows with the context, so a binary search finds it in about a dozen checks.
    """
    top = trained or MAX_SEARCH_CONTEXT
    if fits_at(top):
        return top
    # Invariant: lo * KV_PADDING fits (or lo is 0); hi * KV_PADDING, at least `top`, does not.
    lo, hi = 0, -(-top // KV_PADDING)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits_at(mid * KV_PADDING):
            lo = mid
        else:
            hi = mid
    return lo * KV_PADDING


class _Tree:
    """One walk through the tree; collects reasons as it goes."""

    def __init__(self, machine: Machine, candidates: list[Candidate], context: int, kv_type: str, torch_ok: bool,
                 flash_attn: bool = True):
        self.m, self.context, self.kv_type, self.torch_ok = machine, context, kv_type, torch_ok
        self.flash_attn = flash_attn
        self.candidates = sorted(candidates, key=lambda c: quality_key(c.quant), reverse=True)
        self.reasons: list[str] = []
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
        s = ForecastSettings(
            n_ctx=context or self.context, kv_type=kv or self.kv_type, flash_attn=self.flash_attn,
            n_gpu_layers=n_gpu_layers, repack_types=self.m.cpu_repack, tensor_split=self.tensor_split,
        )
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

    def plan(self, c: Candidate, n_gpu_layers: int, fits: bool, context: int | None = None, kv: str | None = None):
        s = self.settings(c, n_gpu_layers, context, kv)
        if not s.swa_full:
            saved = forecast(c.shape, replace(s, swa_full=True)).total("total_bytes") - forecast(c.shape, s).total(
                "total_bytes")
            self.reasons.append(
                f"Its sliding-window layers keep only their {c.shape.sliding_window:,}-token window, which saves "
                f"{gb(saved)} (the full-size cache does not fit); a reply that edits a message further back than "
                "the window prefills the chat again."
            )
        return Plan(
            format=c.format, files=c.files, quant=c.quant, n_layers=c.shape.n_layers, n_gpu_layers=n_gpu_layers,
            context=s.n_ctx, kv_type=s.kv_type, flash_attn=s.flash_attn, n_batch=s.n_batch, n_ubatch=s.n_ubatch,
            fits=fits, forecast=forecast(c.shape, s), reasons=tuple(self.reasons),
            gpu_unused_reason=None if self.m.gguf_gpu or c.format != "gguf" else self.m.gpu_note,
            swa_full=s.swa_full, tensor_split=s.tensor_split if n_gpu_layers else (),
        )

    # ------------------------------------------------------------ the context

    def candidate_of(self, plan: Plan) -> Candidate:
        return next(c for c in self.candidates if c.files == plan.files)

    def largest_context(self, c: Candidate, n_gpu_layers: int) -> int:
        """The largest context at which `c` with `n_gpu_layers` on the GPU passes this tree's fits()."""
        return largest_fitting_context(
            lambda n: self.fits(forecast(c.shape, self.settings(c, n_gpu_layers, n))), c.shape.n_ctx_train)

    def with_context(self, plan: Plan, auto_cap: int | None) -> Plan:
        """`plan` with its largest context, said in the reasons. Under Context: Auto (`auto_cap` set, and
        already at most the trained length) the tree walked at the least context auto accepts; the plan
        then moves to the largest context that fits, at most `auto_cap`."""
        c = self.candidate_of(plan)
        most = self.largest_context(c, plan.n_gpu_layers)
        if most:
            if plan.n_gpu_layers > plan.n_layers:
                where = f"fully on {self.on_gpus()}"
            elif plan.n_gpu_layers == 0:
                where = "in RAM"
            else:
                where = f"with {plan.n_gpu_layers} of {plan.n_layers} layers on {self.on_gpus()}"
            trained = ", the model's trained length" if most == c.shape.n_ctx_train else ""
            self.reasons.append(f"{plan.quant or plan.format.upper()} {'fits' if plan.fits else 'would fit'} "
                                f"{where} up to {most:,} tokens of context{trained}.")
        if auto_cap is None:
            return replace(plan, max_context=most, reasons=tuple(self.reasons))
        if not plan.fits:
            self.reasons.append(f"Context: auto needs at least {self.context:,} tokens; not even that fits.")
            return replace(plan, max_context=most, reasons=tuple(self.reasons))
        context = max(self.context, min(most, auto_cap))
        if context == c.shape.n_ctx_train:
            why = "the model's trained length: all of it fits"
        elif most > context:
            why = f"the auto cap; {most:,} would fit, raise the cap for more"
        elif len(self.candidates) > 1:
            why = f"the most that fits; files are compared at {self.context:,} tokens of context"
        else:
            why = "the most that fits"
        self.reasons.append(f"Context: auto — {context:,} tokens ({why}).")
        if not plan.swa_full:
            # plan() says it again, with the bytes the window saves at the new context.
            self.reasons.remove(plan.reasons[-1])
        return replace(self.plan(c, plan.n_gpu_layers, True, context, plan.kv_type), max_context=most)

    # ------------------------------------------------------------ the tree

    def walk(self) -> Plan:
        if not self.candidates:
            raise ValueError("the repo has no GGUF, AWQ or FP8 model files")
        m = self.m
        if m.gpu_note:
            self.reasons.append(m.gpu_note)
        if m.has_gpu:
            self.reasons.append(self.gpus_reason())
            native = self.gpu_native()
            if native:
                return native
            if m.gguf_gpu:
                return self.gguf_full_offload() or self.gguf_partial_offload() or self.gpu_too_small() \
                    or self.nothing_fits()
            self.reasons.append(f"GGUF runs on the CPU with {gb(self.ram_budget)} of RAM to plan with.")
            return self.cpu_only() or self.nothing_fits()
        self.reasons.append(f"No NVIDIA GPU: running on the CPU with {gb(self.ram_budget)} of RAM to plan with.")
        return self.cpu_only() or self.nothing_fits()

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

    def gpu_too_small(self) -> Plan | None:
        """Not one layer fits on the GPU: the CPU plan, if the model fits in RAM."""
        where = "the GPU's" if len(self.m.gpus) < 2 else "the GPUs'"
        self.reasons.append(
            f"Not even one layer fits in {where} {gb(self.gpu_budget)}: running on the CPU with "
            f"{gb(self.ram_budget)} of RAM to plan with."
        )
        return self.cpu_only()

    def gpu_native(self) -> Plan | None:
        native = [c for c in self.candidates if c.format in ("awq", "fp8")]
        if not native:
            return None
        if not self.torch_ok:
            self.reasons.append("The repo has AWQ/FP8 checkpoints, but the PyTorch engine is not installed: using GGUF.")
            return None
        cc = self.m.compute_capability or (0, 0)
        fp8 = [c for c in native if c.format == "fp8"]
        order = (fp8 if cc >= (8, 9) else []) + [c for c in native if c.format == "awq"]
        for c in order:
            f = forecast(c.shape, self.settings(c, c.shape.n_layers + 1))
            if self.fits(f):
                why = "FP8 runs natively on compute capability >= 8.9" if c.format == "fp8" else "4-bit AWQ"
                extra = " (datacenter GPUs run AWQ/FP8 faster than GGUF)" if self.m.is_datacenter else ""
                self.reasons.append(f"The whole {c.format.upper()} model fits in VRAM: {why}{extra}.")
                return self.plan(c, c.shape.n_layers + 1, True)
        self.reasons.append("The AWQ/FP8 checkpoints do not fit entirely in VRAM: looking at GGUF.")
        return None

    def gguf(self) -> list[Candidate]:
        return [c for c in self.candidates if c.format == "gguf"]

    def gguf_full_offload(self) -> Plan | None:
        for c in self.gguf():
            all_layers = c.shape.n_layers + 1
            if self.fits(forecast(c.shape, self.settings(c, all_layers))):
                self.reasons.append(
                    f"{c.quant} is the highest-quality level that fits entirely on {self.on_gpus()} at "
                    f"{self.context:,} tokens of context ({self.kv_type} KV cache){self.split_words(c, all_layers)}."
                )
                return self.plan(c, all_layers, True)
            self.reasons.append(f"{c.quant} ({gb(c.size_bytes)}) does not fit entirely on {self.on_gpus()}.")
        return None

    def gguf_partial_offload(self) -> Plan | None:
        """The best level with at least half its layers on the GPU; else the most layers of any."""
        options = [(c, self.max_gpu_layers(c)) for c in self.gguf()]
        options = [(c, n) for c, n in options if n > 0]
        if not options:
            return None
        half = [(c, n) for c, n in options if 2 * n >= c.shape.n_layers]
        c, layers = half[0] if half else max(options, key=lambda o: o[1] / o[0].shape.n_layers)
        which = self.split_words(c, layers) or (
            f" (the output layer and the last {layers - 1} repeating layers)" if layers > 1 else " (the output layer)")
        self.reasons.append(
            f"{c.quant} fits with {layers} of {c.shape.n_layers} layers on {self.on_gpus()}{which} and the rest in "
            "RAM (partial offload: slower than a full fit"
            + ("; the best level with at least half of its layers on the GPU)." if half else ").")
        )
        return self.plan(c, layers, True)

    def max_gpu_layers(self, c: Candidate) -> int:
        """The most GPU layers (the output layer counted, as llama.cpp does) that fit; 0: not even one.

        Every count is tried: over several cards, one more layer deals the split anew, so a card's
        part does not grow with every layer.
        """
        return max((n for n in range(1, c.shape.n_layers + 1) if self.fits(forecast(c.shape, self.settings(c, n)))),
                   default=0)

    def cpu_only(self) -> Plan | None:
        """Q4_K_M where the repo has it and it fits; otherwise the best level that fits in RAM."""
        gguf = self.gguf()
        default = [c for c in gguf if c.quant == CPU_DEFAULT]
        if not default:
            self.reasons.append(f"The repo has no {CPU_DEFAULT} file, the usual best balance on a CPU.")
        for c in default + [c for c in gguf if c.quant != CPU_DEFAULT]:
            if self.fits(forecast(c.shape, self.settings(c, 0))):
                if c.quant == CPU_DEFAULT:
                    self.reasons.append(f"{CPU_DEFAULT} is the usual best balance of speed and quality on a CPU.")
                else:
                    self.reasons.append(f"{c.quant} is the best remaining level that fits in RAM.")
                return self.plan(c, 0, True)
            self.reasons.append(f"{c.quant} ({gb(c.size_bytes)}) does not fit in RAM.")
        return None

    def nothing_fits(self) -> Plan:
        smallest = min(self.candidates, key=lambda c: c.size_bytes)
        self.reasons.append(f"Nothing fits at {self.context:,} tokens with a {self.kv_type} KV cache.")
        gpu_layers = smallest.shape.n_layers + 1 if self.m.gguf_on_gpu else 0
        for context, kv in ((self.context, "q8_0"), (max(MIN_CONTEXT, self.context // 2), self.kv_type),
                            (MIN_CONTEXT, "q8_0")):
            if self.fits(forecast(smallest.shape, self.settings(smallest, gpu_layers, context, kv))):
                self.reasons.append(f"{smallest.quant} would fit at {context:,} tokens with a {kv} KV cache.")
                break
        else:
            self.reasons.append("Even the smallest file does not fit at 2,048 tokens: choose a smaller model.")
        return self.plan(smallest, gpu_layers, False)


def make_plan(
    machine: Machine,
    candidates: list[Candidate],
    context: int | None = 4096,
    kv_type: str = "f16",
    torch_ok: bool = False,
    flash_attn: bool = True,
    auto_context_cap: int = AUTO_CONTEXT_CAP,
) -> Plan:
    """Walk the decision tree for `candidates` on `machine`.

    Args:
        context: Tokens of context; None is Context: Auto, the largest that fits, at most
            `auto_context_cap` and the model's trained length. Files are compared at
            AUTO_WALK_CONTEXT (a file that fits only a few turns is not worth its quality), or at
            MIN_CONTEXT when none fits that much.

    Raises:
        ValueError: no candidates, or a cap that is not positive.
    """
    trained = plan_context_cap(candidates)
    auto_cap = None
    if context is None:
        if auto_context_cap <= 0:
            raise ValueError(f"auto_context_cap must be a positive number of tokens, not {auto_context_cap}")
        # llama.cpp pads its cache to KV_PADDING tokens: a cap between two steps takes the lower one.
        auto_cap = max(KV_PADDING, auto_context_cap // KV_PADDING * KV_PADDING)
        auto_cap = min(auto_cap, trained) if trained else auto_cap
        context = min(AUTO_WALK_CONTEXT, auto_cap)
    tree = _Tree(machine, candidates, context, kv_type, torch_ok, flash_attn)
    plan = tree.walk()
    if auto_cap is not None and not plan.fits and context > MIN_CONTEXT:
        # Nothing holds a working conversation: the best file that fits at the least context.
        tree = _Tree(machine, candidates, min(MIN_CONTEXT, auto_cap), kv_type, torch_ok, flash_attn)
        plan = tree.walk()
    plan = tree.with_context(plan, auto_cap)
    if trained and plan.context > trained:
        return replace(plan, reasons=(*plan.reasons, f"Note: the model was trained for {trained:,} tokens of context."))
    return plan


_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)


def gguf_candidates(files: list[tuple[str, int]], shape: ModelShape) -> list[Candidate]:
    """Candidates from a repo's GGUF files (name, size): split sets joined, projector files left out.

    `shape` is read from one header of the repo; the other files are scaled to their size.
    """
    sets: dict[str, list[tuple[str, int]]] = {}
    for name, size in files:
        base = name.rsplit("/", 1)[-1]
        if not base.lower().endswith(".gguf") or base.lower().startswith("mmproj"):
            continue
        split = _SPLIT.match(name)
        sets.setdefault(split.group("stem") if split else name, []).append((name, size))
    out = []
    for parts in sets.values():
        parts.sort()
        size = sum(s for _, s in parts)
        quant = quant_from_name(parts[0][0])
        out.append(Candidate("gguf", tuple(n for n, _ in parts), quant, size, scaled_to(shape, size, quant)))
    return out


def plan_context_cap(candidates: list[Candidate]) -> int | None:
    return min((c.shape.n_ctx_train for c in candidates if c.shape.n_ctx_train), default=None)

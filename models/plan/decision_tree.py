"""The quantization decision tree: which file of a repo to run on this machine, and how.

Every step taken is written into `Plan.reasons` in plain words; the GUI and `tailor plan`
show them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from models.formats.quant_levels import CPU_DEFAULT, quality_key
from models.plan.budget import Budget
from models.plan.candidates import NATIVE_FORMATS, Candidate
from models.plan.context import (
    AUTO_CONTEXT_CAP,
    AUTO_WALK_CONTEXT,
    EMBEDDING_CONTEXT_CAP,
    MIN_CONTEXT,
    plan_context_cap,
)
from models.plan.forecast import KV_PADDING, Forecast, forecast
from models.plan.machine import Machine
from models.units import gb

# FP8 matmul (torch._scaled_mm) needs Ada or newer.
FP8_MIN_CC = (8, 9)


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
    # An embedding model's plan (models/formats/embedding_models.py): loaded for embeddings only, its context
    # the longest input it embeds, in one ubatch.
    embedding: bool = False

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
            "embedding": self.embedding,
            "forecast": self.forecast.to_dict() if self.forecast else None,
        }


class _Tree(Budget):
    """One walk through the tree; collects reasons as it goes."""

    def __init__(self, machine: Machine, candidates: list[Candidate], context: int, kv_type: str, torch_ok: bool,
                 flash_attn: bool = True):
        super().__init__(machine, context, kv_type, flash_attn)
        self.torch_ok = torch_ok
        self.candidates = sorted(candidates, key=lambda c: quality_key(c.quant), reverse=True)
        self.reasons: list[str] = []

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
            raise ValueError("the repo has no GGUF, AWQ, GPTQ or FP8 model files")
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

    def gpu_too_small(self) -> Plan | None:
        """Not one layer fits on the GPU: the CPU plan, if the model fits in RAM."""
        where = "the GPU's" if len(self.m.gpus) < 2 else "the GPUs'"
        self.reasons.append(
            f"Not even one layer fits in {where} {gb(self.gpu_budget)}: running on the CPU with "
            f"{gb(self.ram_budget)} of RAM to plan with."
        )
        return self.cpu_only()

    def gpu_native(self) -> Plan | None:
        """A checkpoint for the PyTorch engine, whole on the GPU: FP8 where the card has FP8 matmuls
        (compute capability >= 8.9), then 4-bit AWQ, then 4-bit GPTQ; with no GGUF to fall back on, an
        FP8 checkpoint upcast to bf16 on an older card."""
        native = [c for c in self.candidates if c.format in NATIVE_FORMATS]
        if not native:
            return None
        if not self.torch_ok:
            self.reasons.append("The repo has AWQ/GPTQ/FP8 checkpoints, but the PyTorch engine is not installed: "
                                "using GGUF.")
            return None
        cc = self.m.compute_capability or (0, 0)
        fp8 = [c for c in native if c.format == "fp8"]
        awq = [c for c in native if c.format == "awq"]
        gptq = [c for c in native if c.format == "gptq" and c.quant == "GPTQ 4-bit"]
        if len(gptq) < sum(c.format == "gptq" for c in native):
            self.reasons.append("GPTQ checkpoints other than 4-bit are not chosen on a GPU: no kernel keeps them small.")
        order = (fp8 if cc >= FP8_MIN_CC else []) + awq + gptq
        if fp8 and cc < FP8_MIN_CC:
            self.reasons.append(f"Compute capability {cc[0]}.{cc[1]} has no FP8 matmul (8.9 or more): the FP8 "
                                "checkpoint would be upcast to bf16 at load, twice its size.")
            if not self.gguf():
                order += [self._upcast(c) for c in fp8]
        for c in order:
            f = forecast(c.shape, self.settings(c, c.shape.n_layers + 1))
            if self.fits(f):
                why = {"fp8": "FP8 runs natively on compute capability >= 8.9", "awq": "4-bit AWQ",
                       "gptq": "4-bit GPTQ"}[c.format]
                if c.format == "fp8" and cc < FP8_MIN_CC:
                    why = "FP8 upcast to bf16 at load (there is no GGUF file to choose instead)"
                extra = " (datacenter GPUs run AWQ/GPTQ/FP8 faster than GGUF)" if self.m.is_datacenter else ""
                self.reasons.append(f"The whole {c.format.upper()} model fits in VRAM: {why}{extra}.")
                return self.plan(c, c.shape.n_layers + 1, True)
            if c.format == "fp8" and cc < FP8_MIN_CC:
                self.reasons.append(f"The FP8 checkpoint upcast to bf16 ({gb(sum(c.shape.layer_weight_bytes))} of "
                                    f"layers) does not fit on {self.on_gpus()}.")
        self.reasons.append("The AWQ/GPTQ/FP8 checkpoints do not fit entirely in VRAM: looking at GGUF.")
        return None

    def _upcast(self, c: Candidate) -> Candidate:
        """`c` as the engine holds it below compute capability 8.9: its FP8 layers in bf16, twice the bytes."""
        up = replace(c, shape=replace(c.shape, layer_weight_bytes=tuple(2 * b for b in c.shape.layer_weight_bytes)))
        self.candidates = [up if x is c else x for x in self.candidates]
        return up

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
    embedding = bool(candidates) and all(c.shape.embedding for c in candidates)
    if embedding:
        auto_context_cap = min(auto_context_cap, EMBEDDING_CONTEXT_CAP)
        if context is not None and trained:
            context = min(context, trained)  # past it an input has no learned position (the engine caps it too)
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
    if embedding:
        plan = replace(plan, embedding=True, reasons=(*plan.reasons, embedding_reason(candidates[0], plan.context)))
    if trained and plan.context > trained:
        return replace(plan, reasons=(*plan.reasons, f"Note: the model was trained for {trained:,} tokens of context."))
    return plan


def embedding_reason(c: Candidate, context: int) -> str:
    """What an embedding model's plan means, in one line."""
    cache = ("it keeps no KV cache (an encoder)" if c.shape.encoder
             else "its KV cache holds one batch of inputs")
    return (f"An embedding model: it makes vectors, not replies; {cache}. Its context, {context:,} tokens, is the "
            "longest input it embeds, and every batch of inputs is evaluated at once.")

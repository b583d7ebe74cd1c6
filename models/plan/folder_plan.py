"""The plan for a Hugging Face model folder (dense, AWQ, GPTQ or FP8 safetensors): the PyTorch engine runs it.

There is nothing to choose between (one checkpoint), so the plan says where the engine will put it
(the whole model on the GPU, or on the CPU in fp32), whether it fits, what the KV block pool takes,
and why, in the same Plan the decision tree gives for GGUF files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from models.formats.hf_config import read_hf_config
from models.hub.client import RepoFile
from models.hub.repo_files import group_files
from models.plan.budget import GPU_RESERVE_BYTES, PAGED_BLOCK_SIZE, RAM_RESERVE_BYTES, SAFETY_MARGIN
from models.plan.candidates import Candidate
from models.plan.context import AUTO_CONTEXT_CAP, MIN_CONTEXT, largest_fitting_context
from models.plan.decision_tree import FP8_MIN_CC, Plan
from models.plan.forecast import DeviceForecast, Forecast, ForecastSettings, ModelShape, forecast, scaled_to
from models.plan.load_options import TorchOptions
from models.plan.machine import Machine
from models.plan.sources import checkpoint_candidate
from models.units import gb

# The PyTorch engine's KV budget on the CPU when the user sets none (engine/torch/kv_pool.py uses it).
DEFAULT_CPU_KV_BYTES = 1 << 30
# Checkpoint formats the PyTorch engine runs: unquantized ("safetensors"), AWQ 4-bit, GPTQ 4/8-bit, FP8.
TORCH_FORMATS = ("safetensors", "awq", "gptq", "fp8")
GPTQ_BITS = (4, 8)


def is_model_folder(path: str | Path) -> bool:
    p = Path(path).expanduser()
    return p.is_dir() and (p / "config.json").is_file()


def folder_candidate(directory: str | Path) -> Candidate:
    """The candidate of a local model folder: shape from config.json, sizes from its safetensors files.

    Raises:
        InvalidModelFile: config.json is unreadable.
        ValueError: no safetensors files, or config.json lacks a dimension the forecast needs.
    """
    folder = Path(directory).expanduser()
    config = read_hf_config(folder / "config.json")
    files = [RepoFile(p.name, p.stat().st_size, None, "") for p in sorted(folder.glob("*.safetensors"))]
    if not files:
        raise ValueError(f"{folder.name} has no .safetensors files")
    group = group_files(files, config)[-1]
    return replace(checkpoint_candidate(group, config), files=(str(folder),))


def parameter_count(shape: ModelShape) -> int:
    """Weights of a Llama-style model (attention, SwiGLU MLP, embeddings); norms and biases left out."""
    h, hd = shape.n_embd, shape.head_dim_k
    ff = shape.n_ff or 4 * h
    per_layer = 2 * h * shape.n_heads * hd + 2 * h * shape.n_kv_heads[0] * hd + 3 * h * ff
    embeddings = shape.n_vocab * h * (1 if shape.output_tied else 2)
    return shape.n_layers * per_layer + embeddings


def embedding_parameters(shape: ModelShape) -> int:
    """Parameters of the embedding table and, unless tied, the output layer: dense in an AWQ checkpoint."""
    return shape.n_vocab * shape.n_embd * (1 if shape.output_tied else 2)


def cpu_ram_budget(ram_available_bytes: int) -> int:
    """RAM the PyTorch engine plans with on the CPU: what is available, less a reserve and a margin."""
    return int(max(0, ram_available_bytes - RAM_RESERVE_BYTES) * (1 - SAFETY_MARGIN))


@dataclass(frozen=True, slots=True)
class CpuWeights:
    """How the PyTorch engine holds a folder's weights on the CPU, and their bytes there."""

    kind: str  # "fp32": dense, or AWQ dequantized at load; "int4": AWQ kept 4-bit; "none": neither fits
    bytes: int
    fp32_bytes: int
    int4_bytes: int | None  # an AWQ checkpoint's weights kept 4-bit; None for a dense one


def cpu_weights(shape: ModelShape, packed_bytes: int | None, kv_pool_bytes: int, ram_available_bytes: int) -> CpuWeights:
    """fp32 when the weights fit in RAM beside the KV pool: exact, and the quickest prefill. A 4-bit AWQ
    or GPTQ checkpoint (`packed_bytes`: its file) that does not fit so keeps its 4-bit weights in PyTorch's int4 CPU
    kernel, about 8x smaller (its embeddings, dense in the file, go to fp32). The engine (engine/torch/
    session.py) and the plan decide with this one rule."""
    fp32 = 4 * parameter_count(shape)
    # The file holds the embeddings in 16 bits; in memory they are fp32.
    int4 = packed_bytes + 2 * embedding_parameters(shape) if packed_bytes is not None else None
    budget = cpu_ram_budget(ram_available_bytes)
    if fp32 + kv_pool_bytes <= budget:
        return CpuWeights("fp32", fp32, fp32, int4)
    if int4 is not None and int4 + kv_pool_bytes <= budget:
        return CpuWeights("int4", int4, fp32, int4)
    return CpuWeights("none", fp32, fp32, int4)


def checkpoint_bits(candidate: Candidate) -> int | None:
    """The bit width in a checkpoint's label ("GPTQ 4-bit" -> 4), or None."""
    found = re.search(r"(\d+)-bit", candidate.quant or "")
    return int(found.group(1)) if found else None


def int4_file_bytes(candidate: Candidate) -> int | None:
    """The file bytes of a checkpoint whose weights can stay 4-bit (AWQ, 4-bit GPTQ); None for others."""
    four_bit = candidate.format == "awq" or (candidate.format == "gptq" and checkpoint_bits(candidate) == 4)
    return candidate.size_bytes if four_bit else None


def default_cpu_kv_bytes(ram_available_bytes: int) -> int:
    """The CPU KV pool when the user sets none: DEFAULT_CPU_KV_BYTES, at most a quarter of free RAM."""
    return min(DEFAULT_CPU_KV_BYTES, ram_available_bytes // 4)


def unsupported_reason(candidate: Candidate) -> str | None:
    """Why the PyTorch engine cannot run this checkpoint (one line), or None when it can."""
    if candidate.format not in TORCH_FORMATS:
        return (f"{candidate.format.upper()} checkpoints are not supported by the PyTorch engine "
                "(dense, AWQ, GPTQ and FP8 only): use a GGUF file of this model.")
    bits = checkpoint_bits(candidate)
    if candidate.format == "gptq" and bits not in GPTQ_BITS:
        return (f"{bits}-bit GPTQ is not supported by the PyTorch engine (only 4-bit and 8-bit): "
                "use a GGUF file of this model.")
    return None


def fp8_native(machine: Machine) -> bool:
    return (machine.compute_capability or (0, 0)) >= FP8_MIN_CC


def gpu_weights(machine: Machine, candidate: Candidate) -> tuple[int, str | None]:
    """The bytes of the weights on the GPU as the engine holds them, and a line on how, if it needs one."""
    dense16 = 2 * parameter_count(candidate.shape)
    cc = ".".join(map(str, machine.compute_capability or (0, 0)))
    if candidate.format == "fp8":
        if fp8_native(machine):
            return candidate.size_bytes, (f"FP8 weights stay 8-bit: compute capability {cc} runs FP8 matmuls "
                                          "(torch._scaled_mm).")
        return dense16, (f"Compute capability {cc} has no FP8 matmul (8.9 or more): the FP8 weights are upcast to "
                         f"bf16 at load, {gb(dense16)} instead of {gb(candidate.size_bytes)}.")
    if candidate.format == "gptq" and checkpoint_bits(candidate) == 8:
        return dense16, f"8-bit GPTQ has no int8 kernel here: the weights are dequantized to bf16 at load ({gb(dense16)})."
    if int4_file_bytes(candidate) is not None:
        return candidate.size_bytes, None  # 4-bit AWQ/GPTQ stays 4-bit: the file's size
    return dense16, None


def _cpu_how(candidate: Candidate, held: CpuWeights) -> str:
    name = candidate.format.upper()
    if held.kind == "int4":
        return (f"{name} weights kept 4-bit in PyTorch's int4 CPU kernel ({gb(held.bytes)}; dequantized to fp32 "
                f"they would take {gb(held.fp32_bytes)}, more than fits; prefill is slower than in fp32)")
    if candidate.format == "fp8":
        return f"fp32 ({gb(held.bytes)} of weights, upcast from {gb(candidate.size_bytes)} of FP8 weights: no FP8 matmul on a CPU)"
    if candidate.format in ("awq", "gptq"):
        bits = checkpoint_bits(candidate) or 4
        return f"fp32 ({gb(held.bytes)} of weights, dequantized from {gb(candidate.size_bytes)} of {bits}-bit {name} weights)"
    return f"fp32 ({gb(held.bytes)} of weights)"


def plan_folder(
    machine: Machine,
    candidate: Candidate,
    context: int | None = 4096,
    torch_ok: bool = True,
    options: TorchOptions | None = None,
    auto_context_cap: int = AUTO_CONTEXT_CAP,
) -> Plan:
    """Where and whether the PyTorch engine runs the folder of `candidate` (from folder_candidate).

    `context` None is Context: Auto (`_auto_context`). `options` size the KV block pool (the GPU memory
    share, the CPU budget) as the engine will; None: the defaults.
    """
    options = options or TorchOptions()
    reasons: list[str] = []
    shape, on_gpu = candidate.shape, machine.has_gpu
    usable = _usable(candidate, torch_ok, reasons)
    weights, budget, user_pool = _weights_and_budget(machine, candidate, options.cpu_kv_bytes, reasons)
    scale = 1 if on_gpu else 2  # the KV cache and activations are in the weights' dtype: fp32 on the CPU

    def at(n_ctx: int) -> tuple[ForecastSettings, int, int]:
        """The settings at `n_ctx`, and the bytes of its KV cache and activations."""
        s = ForecastSettings(n_ctx=n_ctx, kv_type="f16", n_gpu_layers=shape.n_layers + 1 if on_gpu else 0,
                             paged_block_size=PAGED_BLOCK_SIZE)
        base = forecast(scaled_to(shape, weights), s)
        return s, scale * base.total("kv_cache_bytes"), scale * base.total("compute_bytes")

    most = largest_fitting_context(lambda n: weights + sum(at(n)[1:]) <= budget, shape.n_ctx_train)
    auto_reason = None
    if context is None:
        context, auto_reason = _auto_context(most, shape.n_ctx_train, auto_context_cap)
    settings, needed_kv, compute = at(context)
    needed = weights + needed_kv + compute
    fits = usable and needed <= budget
    pool, where = _kv_pool(machine, options, weights, needed_kv, compute, user_pool)
    per_token = needed_kv / max(1, -(-context // PAGED_BLOCK_SIZE) * PAGED_BLOCK_SIZE)
    if usable:
        parts = f"the weights ({gb(weights)}), a KV cache of {context:,} tokens ({gb(needed_kv)}) and activations"
        reasons.append(f"{parts[0].upper()}{parts[1:]} ({gb(compute)}) fit: {gb(needed)} of {gb(budget)}." if fits else
                       f"Does not fit: {parts} need {gb(needed)}, {gb(budget)} are free; "
                       f"{_what_would_fit(machine, candidate)}.")
        tokens = int(pool / per_token) if per_token else 0
        reasons.append(f"The KV block pool takes {where}: {gb(pool)}, about {tokens:,} tokens "
                       "shared by all chats (a common prefix is stored once).")
        if most:
            reasons.append(f"One chat's context fits up to {most:,} tokens.")
        if auto_reason:
            reasons.append(auto_reason)
    device = "cuda:0" if on_gpu else "cpu"
    devices = {device: DeviceForecast(weights_bytes=weights, kv_cache_bytes=pool, compute_bytes=compute)}
    trained = shape.n_ctx_train
    if trained and context > trained:
        reasons.append(f"Note: the model was trained for {trained:,} tokens of context; the engine stops there.")
    return Plan(
        format=candidate.format, files=candidate.files, quant=candidate.quant, n_layers=shape.n_layers,
        n_gpu_layers=settings.n_gpu_layers, context=context, kv_type="f16" if on_gpu else "f32", flash_attn=True,
        n_batch=settings.n_batch, n_ubatch=settings.n_ubatch, fits=fits,
        forecast=Forecast(settings, devices), reasons=tuple(reasons), max_context=most,
    )


def _usable(candidate: Candidate, torch_ok: bool, reasons: list[str]) -> bool:
    """Whether the PyTorch engine can run the folder at all; the reasons say what it is, or why not."""
    label = candidate.quant or ("AWQ 4-bit" if candidate.format == "awq" else "dense")
    reasons.append(f"A Hugging Face model folder ({label}): it runs on Tailor's PyTorch engine, not llama.cpp.")
    refusal = unsupported_reason(candidate)
    if refusal:
        reasons.append(refusal)
    if not torch_ok:
        reasons.append("The PyTorch engine is not installed: install the awq extra (pip install -e '.[awq]').")
    return refusal is None and torch_ok


def _auto_context(most: int, trained: int | None, cap: int) -> tuple[int, str]:
    """Context: Auto's choice (the most that fits, at most the cap and the trained length, at least
    MIN_CONTEXT or the cap if lower) and its reason."""
    cap = min(cap, trained) if trained else cap
    context = max(min(MIN_CONTEXT, cap), min(most, cap))
    why = ("the model's trained length" if context == trained else
           f"the auto cap; {most:,} would fit" if most > context else "the most that fits")
    return context, f"Context: auto — {context:,} tokens ({why})."


def _kv_pool(machine: Machine, options: TorchOptions, weights: int, needed_kv: int, compute: int,
             user_pool: int) -> tuple[int, str]:
    """The KV block pool's bytes as the engine sizes it (never less than the chat's context needs), and
    where it comes from."""
    if machine.has_gpu:
        pool = max(needed_kv, int((machine.gpu_free_bytes - weights) * options.gpu_memory_fraction) - compute)
        return pool, f"{options.gpu_memory_fraction:.0%} of the GPU memory left after the weights"
    return max(needed_kv, user_pool), "the CPU budget" + (" you set" if options.cpu_kv_bytes is not None else "")


def _weights_and_budget(machine: Machine, candidate: Candidate, cpu_kv_bytes: int | None,
                        reasons: list[str]) -> tuple[int, int, int]:
    """The weights' bytes where they go, the memory to plan with there, and the CPU's KV pool (0 on a GPU);
    the reasons say where and why."""
    if machine.has_gpu:
        weights, how = gpu_weights(machine, candidate)
        budget = int(max(0, machine.gpu_free_bytes - GPU_RESERVE_BYTES) * (1 - SAFETY_MARGIN))
        reasons.append(f"GPU: {machine.gpu_name}, {gb(machine.gpu_free_bytes)} free of {gb(machine.gpu_total_bytes)}; "
                       f"the whole model goes there ({gb(budget)} to plan with).")
        if how:
            reasons.append(how)
        return weights, budget, 0
    budget = cpu_ram_budget(machine.ram_available_bytes)
    user_pool = cpu_kv_bytes if cpu_kv_bytes is not None else default_cpu_kv_bytes(machine.ram_available_bytes)
    held = cpu_weights(candidate.shape, int4_file_bytes(candidate), user_pool, machine.ram_available_bytes)
    reasons.append(f"No NVIDIA GPU: the PyTorch engine runs on the CPU in {_cpu_how(candidate, held)}, "
                   f"{gb(budget)} of RAM to plan with.")
    return held.bytes, budget, user_pool


def _what_would_fit(machine: Machine, candidate: Candidate) -> str:
    """The end of "Does not fit: …": what would need less memory than this folder."""
    if candidate.format == "fp8" and machine.has_gpu and not fp8_native(machine):
        return ("the FP8 weights are upcast to bf16 on this card (FP8 matmul needs compute capability "
                "8.9): a 4-bit AWQ/GPTQ checkpoint or a GGUF file would need less")
    if candidate.format not in ("awq", "gptq"):
        return "a shorter context, an AWQ 4-bit checkpoint or a GGUF file would need less"
    if machine.has_gpu:
        return "a shorter context or a smaller model would fit"
    return "a shorter context, a smaller model or a GGUF file would need less"

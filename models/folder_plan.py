"""The plan for a Hugging Face model folder (dense or AWQ safetensors): the PyTorch engine runs it.

There is nothing to choose between (one checkpoint), so the plan says where the engine will put it
(the whole model on the GPU, or on the CPU in fp32), whether it fits, what the KV block pool takes,
and why, in the same Plan the decision tree gives for GGUF files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from models.forecast import DeviceForecast, Forecast, ForecastSettings, ModelShape, forecast, scaled_to
from models.hf_config import read_hf_config
from models.hub import RepoFile
from models.load_options import TorchOptions
from models.plan import Plan
from models.plan_budget import GPU_RESERVE_BYTES, PAGED_BLOCK_SIZE, RAM_RESERVE_BYTES, SAFETY_MARGIN
from models.plan_candidates import Candidate
from models.plan_context import AUTO_CONTEXT_CAP, MIN_CONTEXT, largest_fitting_context
from models.plan_machine import Machine
from models.plan_sources import checkpoint_candidate
from models.repo_files import group_files
from models.units import gb

# The PyTorch engine's KV budget on the CPU when the user sets none (engine/torch/kv_pool.py uses it).
DEFAULT_CPU_KV_BYTES = 1 << 30
# Checkpoint formats the PyTorch engine runs: unquantized ("safetensors") and AWQ 4-bit.
TORCH_FORMATS = ("safetensors", "awq")


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


def cpu_weights(shape: ModelShape, awq_file_bytes: int | None, kv_pool_bytes: int, ram_available_bytes: int) -> CpuWeights:
    """fp32 when the weights fit in RAM beside the KV pool: exact, and the quickest prefill. An AWQ
    checkpoint (`awq_file_bytes`) that does not fit so keeps its 4-bit weights in PyTorch's int4 CPU
    kernel, about 8x smaller (its embeddings, dense in the file, go to fp32). The engine (engine/torch/
    session.py) and the plan decide with this one rule."""
    fp32 = 4 * parameter_count(shape)
    # The file holds the embeddings in 16 bits; in memory they are fp32.
    int4 = awq_file_bytes + 2 * embedding_parameters(shape) if awq_file_bytes is not None else None
    budget = cpu_ram_budget(ram_available_bytes)
    if fp32 + kv_pool_bytes <= budget:
        return CpuWeights("fp32", fp32, fp32, int4)
    if int4 is not None and int4 + kv_pool_bytes <= budget:
        return CpuWeights("int4", int4, fp32, int4)
    return CpuWeights("none", fp32, fp32, int4)


def default_cpu_kv_bytes(ram_available_bytes: int) -> int:
    """The CPU KV pool when the user sets none: DEFAULT_CPU_KV_BYTES, at most a quarter of free RAM."""
    return min(DEFAULT_CPU_KV_BYTES, ram_available_bytes // 4)


def plan_folder(
    machine: Machine,
    candidate: Candidate,
    context: int | None = 4096,
    torch_ok: bool = True,
    options: TorchOptions | None = None,
    auto_context_cap: int = AUTO_CONTEXT_CAP,
) -> Plan:
    """Where and whether the PyTorch engine runs the folder of `candidate` (from folder_candidate).

    `context` None is Context: Auto: the largest context that fits, at most `auto_context_cap` and the
    model's trained length (at least MIN_CONTEXT, or the cap if lower, even when that does not fit).
    `options` size the KV block pool (the GPU memory share, the CPU budget) as the engine will;
    None: the defaults.
    """
    options = options or TorchOptions()
    gpu_memory_fraction, cpu_kv_bytes = options.gpu_memory_fraction, options.cpu_kv_bytes
    reasons: list[str] = []
    shape, on_gpu = candidate.shape, machine.has_gpu
    label = candidate.quant or ("AWQ 4-bit" if candidate.format == "awq" else "dense")
    reasons.append(f"A Hugging Face model folder ({label}): it runs on Tailor's PyTorch engine, not llama.cpp.")
    usable = candidate.format in TORCH_FORMATS
    if not usable:
        reasons.append(f"{candidate.format.upper()} checkpoints are not supported by the PyTorch engine "
                       "(dense and AWQ only): use a GGUF file of this model.")
    if not torch_ok:
        usable = False
        reasons.append("The PyTorch engine is not installed: install the awq extra (pip install -e '.[awq]').")
    if on_gpu:
        # AWQ stays 4-bit (the file's size); dense weights run in 16 bits.
        weights = candidate.size_bytes if candidate.format == "awq" else 2 * parameter_count(shape)
        budget = int(max(0, machine.gpu_free_bytes - GPU_RESERVE_BYTES) * (1 - SAFETY_MARGIN))
        reasons.append(f"GPU: {machine.gpu_name}, {gb(machine.gpu_free_bytes)} free of {gb(machine.gpu_total_bytes)}; "
                       f"the whole model goes there ({gb(budget)} to plan with).")
    else:
        budget = cpu_ram_budget(machine.ram_available_bytes)
        user_pool = cpu_kv_bytes if cpu_kv_bytes is not None else default_cpu_kv_bytes(machine.ram_available_bytes)
        held = cpu_weights(shape, candidate.size_bytes if candidate.format == "awq" else None, user_pool,
                           machine.ram_available_bytes)
        weights = held.bytes
        if held.kind == "int4":
            how = (f"AWQ weights kept 4-bit in PyTorch's int4 CPU kernel ({gb(weights)}; dequantized to fp32 "
                   f"they would take {gb(held.fp32_bytes)}, more than fits; prefill is slower than in fp32)")
        elif candidate.format == "awq":
            how = f"fp32 ({gb(weights)} of weights, dequantized from {gb(candidate.size_bytes)} of 4-bit weights)"
        else:
            how = f"fp32 ({gb(weights)} of weights)"
        reasons.append(f"No NVIDIA GPU: the PyTorch engine runs on the CPU in {how}, {gb(budget)} of RAM to plan with.")
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
        cap = min(auto_context_cap, shape.n_ctx_train) if shape.n_ctx_train else auto_context_cap
        context = max(min(MIN_CONTEXT, cap), min(most, cap))
        why = ("the model's trained length" if context == shape.n_ctx_train else
               f"the auto cap; {most:,} would fit" if most > context else "the most that fits")
        auto_reason = f"Context: auto — {context:,} tokens ({why})."
    settings, needed_kv, compute = at(context)
    needed = weights + needed_kv + compute
    fits = usable and needed <= budget
    if on_gpu:
        pool = max(needed_kv, int((machine.gpu_free_bytes - weights) * gpu_memory_fraction) - compute)
        where = f"{gpu_memory_fraction:.0%} of the GPU memory left after the weights"
    else:
        pool = max(needed_kv, user_pool)
        where = "the CPU budget" + (" you set" if cpu_kv_bytes is not None else "")
    per_token = needed_kv / max(1, -(-context // PAGED_BLOCK_SIZE) * PAGED_BLOCK_SIZE)
    if usable:
        if fits:
            reasons.append(f"The weights ({gb(weights)}), a KV cache of {context:,} tokens ({gb(needed_kv)}) and "
                           f"activations ({gb(compute)}) fit: {gb(needed)} of {gb(budget)}.")
        else:
            if candidate.format != "awq":
                hint = "a shorter context, an AWQ 4-bit checkpoint or a GGUF file would need less"
            elif on_gpu:
                hint = "a shorter context or a smaller model would fit"
            else:
                hint = "a shorter context, a smaller model or a GGUF file would need less"
            reasons.append(f"Does not fit: the weights ({gb(weights)}), a KV cache of {context:,} tokens "
                           f"({gb(needed_kv)}) and activations need {gb(needed)}, {gb(budget)} are free; {hint}.")
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

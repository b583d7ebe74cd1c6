"""Where the torch engine's memory goes: weights, KV blocks (allocated, used, shared), activations."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from engine.device_memory import DeviceMeter, build_report
from engine.protocol import MemoryReport
from engine.torch.arch import CausalLM
from engine.torch.attention import KVCache
from engine.torch.llm_engine import LLMEngine
from engine.torch.model_runner import ModelRunner


@dataclass(frozen=True, slots=True)
class TorchMemory:
    """The torch engine's own figures, beyond what MemoryReport carries."""

    weights_bytes: int
    kv_blocks_total: int
    kv_blocks_used: int
    kv_blocks_shared: int  # blocks held by more than one sequence (shared prefixes)
    kv_blocks_cached: int  # free blocks still holding a reusable prefix
    kv_bytes_per_block: int
    activation_peak_bytes: int


EMPTY = TorchMemory(0, 0, 0, 0, 0, 0, 0)


def measure(engine: LLMEngine, model: CausalLM, kv: KVCache, runner: ModelRunner) -> TorchMemory:
    usage = engine.block_manager.usage()
    return TorchMemory(
        weights_bytes=model.weights_bytes(),
        kv_blocks_total=usage.total,
        kv_blocks_used=usage.used,
        kv_blocks_shared=usage.shared,
        kv_blocks_cached=usage.cached_free,
        kv_bytes_per_block=kv.bytes_per_block,
        activation_peak_bytes=activation_peak(model, kv, runner),
    )


def activation_peak(model: CausalLM, kv: KVCache, runner: ModelRunner) -> int:
    device = model.device
    if device.type == "cuda":
        return max(0, torch.cuda.max_memory_allocated(device) - model.weights_bytes() - kv.allocated_bytes)
    # On the CPU, an estimate from the largest step: hidden states, q/k/v, MLP and logits of its tokens.
    c, n = model.config, runner.max_step_tokens
    per_token = 4 * c.hidden_size + (c.num_heads + 2 * c.num_kv_heads) * c.head_dim + 3 * c.intermediate_size
    return n * per_token * model.dtype.itemsize + min(n, runner.config.max_num_seqs) * c.vocab_size * 4


def report(d: TorchMemory, device: torch.device, block_size: int, meter: DeviceMeter) -> MemoryReport:
    """The report both backends send (engine/device_memory.py): our parts, plus what the OS and driver say."""
    ours = {
        "weights": d.weights_bytes,
        "kv": d.kv_blocks_total * d.kv_bytes_per_block,
        "compute": d.activation_peak_bytes,
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        parts: dict[str, dict[str, int]] = {"cpu": {}, f"cuda:{index}": ours}
    else:
        parts = {"cpu": ours}
    built = build_report(parts, meter, d.kv_blocks_used * block_size, d.kv_blocks_total * block_size)
    # Blocks more than one sequence holds: a shared system prompt or conversation prefix, stored once.
    # Free blocks still holding a finished request's prefix: the warm start of the next one.
    return replace(built, kv_shared_tokens=d.kv_blocks_shared * block_size,
                   kv_shared_bytes=d.kv_blocks_shared * d.kv_bytes_per_block,
                   kv_cached_tokens=d.kv_blocks_cached * block_size)

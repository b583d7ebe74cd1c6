"""Where the torch engine's memory goes: weights, KV blocks (allocated, used, shared), activations."""

from __future__ import annotations

from dataclasses import dataclass

import psutil
import torch

from engine.protocol import DeviceMemory, MemoryReport
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


def report(d: TorchMemory, device: torch.device, block_size: int) -> MemoryReport:
    kv_allocated = d.kv_blocks_total * d.kv_bytes_per_block
    kv_used = d.kv_blocks_used * d.kv_bytes_per_block
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        other = max(0, torch.cuda.memory_reserved(device) - d.weights_bytes - kv_allocated)
    else:
        vm = psutil.virtual_memory()
        free, total = vm.available, vm.total
        # The KV pool's pages count once they are touched, which is as blocks get used.
        other = max(0, psutil.Process().memory_info().rss - d.weights_bytes - kv_used - d.activation_peak_bytes)
    memory = DeviceMemory(
        device=str(device),
        weights_bytes=d.weights_bytes,
        kv_allocated_bytes=kv_allocated,
        kv_used_bytes=kv_used,
        compute_bytes=d.activation_peak_bytes,
        other_bytes=other,
        free_bytes=free,
        total_bytes=total,
    )
    return MemoryReport(
        devices=(memory,), kv_tokens_used=d.kv_blocks_used * block_size, kv_tokens_total=d.kv_blocks_total * block_size
    )

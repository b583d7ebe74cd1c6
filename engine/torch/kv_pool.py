"""How many KV blocks the PyTorch engine's pool gets: the same rule the plan forecasts with.

On a GPU the user's share of the memory free after the weights, less room for a full batch's
activations; on the CPU the user's budget, or models/plan/folder_plan.py's default (1 GiB, at most a quarter of free RAM).
"""

from __future__ import annotations

import psutil
import torch

from engine.protocol import LoadRequest
from engine.torch.arch import CausalLM
from models.plan.budget import PAGED_BLOCK_SIZE
from models.plan.folder_plan import default_cpu_kv_bytes

BLOCK_SIZE = PAGED_BLOCK_SIZE
# Tokens one engine step may evaluate: bounds a prefill chunk and the activations it needs.
MAX_BATCHED_TOKENS = 512


def cpu_kv_budget(request: LoadRequest, ram_available_bytes: int) -> int:
    """Bytes of the KV pool on the CPU: the user's budget (even above the default share of RAM), or the default."""
    chosen = request.torch.cpu_kv_bytes
    return chosen if chosen is not None else default_cpu_kv_bytes(ram_available_bytes)


def kv_blocks(request: LoadRequest, device: torch.device, max_len: int, models: list[CausalLM]) -> int:
    """Blocks of the pool. A draft model keeps a pool of as many blocks as the target's, so every
    model in `models` counts in each block."""
    per_block = sum(
        2 * m.config.num_layers * BLOCK_SIZE * m.config.num_kv_heads * m.config.head_dim * m.dtype.itemsize
        for m in models
    )
    if device.type == "cuda":
        c = models[0].config
        free, _total = torch.cuda.mem_get_info(device)
        reserve = MAX_BATCHED_TOKENS * (c.hidden_size * 8 + c.intermediate_size * 3 + c.vocab_size) * 4
        budget = int(free * request.torch.gpu_memory_fraction) - reserve
    else:
        budget = cpu_kv_budget(request, psutil.virtual_memory().available)
    # At least one full-length sequence, whatever the budget says.
    return max(budget // per_block, -(-max_len // BLOCK_SIZE) + 1)

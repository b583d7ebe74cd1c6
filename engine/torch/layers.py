"""The building blocks of Llama-family decoders: RMSNorm, RoPE (with Llama-3 scaling), SwiGLU."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from engine.torch.model_config import RopeConfig


class RMSNorm(torch.nn.Module):
    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.register_buffer("weight", weight)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused kernel instead of five ops: most of a CPU decode step is op overhead
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        # Computed in fp32 like the reference, whatever the model's dtype.
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_inv_freq(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    """Inverse frequencies of the rotary embedding, scaled as the config says."""
    inv = 1.0 / (rope.theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if rope.kind == "linear":
        return inv / rope.factor
    if rope.kind == "llama3":
        low_wavelen = rope.original_max_position / rope.low_freq_factor
        high_wavelen = rope.original_max_position / rope.high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / rope.factor, inv)
        smooth = (rope.original_max_position / wavelen - rope.low_freq_factor) / (
            rope.high_freq_factor - rope.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, smoothed, scaled)
    return inv


class RotaryEmbedding(torch.nn.Module):
    """Rotate-half RoPE with a cos/sin table for every position up to `max_positions`.

    rotate_half(x) = cat(-x2, x1) is computed as roll(x, half) times a sin table whose first half
    is negated: two ops instead of six, exact, since negation is.
    """

    def __init__(self, rope: RopeConfig, head_dim: int, max_positions: int, device: torch.device):
        super().__init__()
        inv = rope_inv_freq(rope, head_dim)
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("cos", emb.cos().to(device))
        self.register_buffer("sin", torch.cat([-freqs.sin(), freqs.sin()], dim=-1).to(device))

    def tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin [T, 1, D] at `positions` [T]: looked up once per step, used by every layer."""
        return self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [T, H, D] rotated at the positions `cos`/`sin` ([T, 1, D], from RotaryEmbedding.tables) were taken at."""
    xf = x.float()
    out = xf * cos + xf.roll(xf.shape[-1] // 2, dims=-1) * sin
    return out.to(x.dtype)


class SwiGLU(torch.nn.Module):
    """down(silu(gate(x)) * up(x)) with gate and up fused into one projection."""

    def __init__(self, gate_up: torch.nn.Module, down: torch.nn.Module):
        super().__init__()
        self.gate_up = gate_up
        self.down = down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)

"""Llama, Qwen2 and Qwen3 decoders (Mistral and SmolLM are Llamas) built from a checkpoint's tensors.

The families differ only in details read from the config: Qwen2's q/k/v projections carry
biases, Qwen3 normalizes each head's q and k, and small Qwen models tie the output head to
the embeddings. q/k/v and gate/up
are fused into one projection each, so a layer makes four matmuls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.torch.attention import AttnMeta, KVCache, paged_attention
from engine.torch.checkpoint import TensorSource
from engine.torch.layers import RMSNorm, RotaryEmbedding, SwiGLU, apply_rope
from engine.torch.linear import Weight, fuse, make_linear
from engine.torch.model_config import CheckpointError, ModelConfig
from engine.torch.weights import dtype_for, read_weight


class DecoderLayer(torch.nn.Module):
    def __init__(self, config: ModelConfig, parts: dict[str, torch.nn.Module]):
        super().__init__()
        self.input_norm = parts["input_norm"]
        self.qkv = parts["qkv"]
        self.o = parts["o"]
        self.post_norm = parts["post_norm"]
        self.mlp = parts["mlp"]
        self.q_norm = parts.get("q_norm")
        self.k_norm = parts.get("k_norm")
        self.q_size = config.num_heads * config.head_dim
        self.kv_size = config.num_kv_heads * config.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_heads, config.num_kv_heads, config.head_dim
        self.scale = config.head_dim**-0.5

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        meta: AttnMeta,
    ) -> torch.Tensor:
        """x: [T, hidden]; rope: cos and sin of this step's positions (RotaryEmbedding.tables)."""
        t = x.shape[0]
        qkv = self.qkv(self.input_norm(x))
        heads = self.num_heads + self.num_kv_heads
        v = qkv[:, self.q_size + self.kv_size :].view(t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k, _ = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
            q = apply_rope(self.q_norm(q.view(t, self.num_heads, self.head_dim)), *rope)
            k = apply_rope(self.k_norm(k.view(t, self.num_kv_heads, self.head_dim)), *rope)
        else:  # q and k sit side by side in qkv: one rotation for both heads' sets
            qk = apply_rope(qkv[:, : self.q_size + self.kv_size].view(t, heads, self.head_dim), *rope)
            q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]
        attn = paged_attention(q, k, v, cache_k, cache_v, meta, self.scale)
        x = x + self.o(attn.reshape(t, self.q_size))
        return x + self.mlp(self.post_norm(x))


class CausalLM(torch.nn.Module):
    """forward() gives final hidden states; logits() projects the rows that need them."""

    def __init__(
        self,
        config: ModelConfig,
        embed: torch.Tensor,
        layers: list[DecoderLayer],
        norm: RMSNorm,
        lm_head: torch.nn.Module | None,
        device: torch.device,
        dtype: torch.dtype,
    ):
        super().__init__()
        self.config = config
        self.device = device
        self.dtype = dtype
        self.register_buffer("embed", embed)
        self.layers = torch.nn.ModuleList(layers)
        self.norm = norm
        self.lm_head = lm_head
        self.rope = RotaryEmbedding(config.rope, config.head_dim, config.max_position_embeddings, device)

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, kv: KVCache, meta: AttnMeta
    ) -> torch.Tensor:
        x = F.embedding(input_ids, self.embed)
        rope = self.rope.tables(positions)
        for i, layer in enumerate(self.layers):
            x = layer(x, rope, kv.k[i], kv.v[i], meta)
        return self.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        out = self.lm_head(hidden) if self.lm_head is not None else F.linear(hidden, self.embed)
        return out.float()

    def weights_bytes(self) -> int:
        seen: set[int] = set()
        total = 0
        for buf in self.buffers():
            if buf.data_ptr() not in seen and buf is not self.rope.cos and buf is not self.rope.sin:
                seen.add(buf.data_ptr())
                total += buf.numel() * buf.element_size()
        return total


@dataclass(frozen=True, slots=True)
class LoadedModel:
    model: CausalLM
    config: ModelConfig
    file_bytes: int


def default_dtype(config: ModelConfig, device: torch.device) -> torch.dtype:
    """fp32 on the CPU (fast and exact there); on CUDA bf16 for AWQ, GPTQ and FP8 (the int4 and FP8
    kernels'), else as stored."""
    if device.type != "cuda":
        return torch.float32
    return dtype_for(config.quant, config.torch_dtype)


def load_model(
    directory: Path, device: torch.device | str = "cpu", dtype: torch.dtype | None = None, awq_int4: bool | None = None,
    on_layer: Callable[[float], None] | None = None,
) -> LoadedModel:
    """Read config.json and the safetensors weights of `directory` into a CausalLM.

    `on_layer(fraction)`: told the share of the layers read, before each and at the end (it may raise, to
    stop the load: the open shards are closed).

    `awq_int4`: 4-bit AWQ and GPTQ weights stay 4-bit in the int4 kernel (default: on CUDA; on the
    CPU they are dequantized, unless they would not fit: models/plan/folder_plan.py cpu_weights decides).
    FP8 weights stay 8-bit on a GPU of compute capability 8.9 or more, else are upcast to `dtype`.

    Raises:
        CheckpointError: unsupported architecture, missing/mismatched shards, pickle-only repo,
            missing or misshapen tensors.
    """
    directory = Path(directory)
    config = ModelConfig.from_dir(directory)
    device = torch.device(device)
    dtype = dtype or default_dtype(config, device)
    source = TensorSource(directory)
    try:
        builder = _Builder(config, source, device, dtype, awq_int4)
        layers = []
        for i in range(config.num_layers):  # the layers hold nearly all the bytes: a fair measure of progress
            if on_layer is not None:
                on_layer(i / config.num_layers)
            layers.append(builder.layer(i))
        embed = builder.dense("model.embed_tokens.weight", (config.vocab_size, config.hidden_size))
        norm = RMSNorm(builder.dense("model.norm.weight", (config.hidden_size,)), config.rms_norm_eps)
        lm_head = None
        has_head = "lm_head.weight" in source or "lm_head.qweight" in source  # GPTQ may quantize the head
        if has_head and not config.tie_word_embeddings:
            lm_head = builder.linear("lm_head", config.vocab_size, config.hidden_size, bias=False)
        elif not config.tie_word_embeddings:
            raise CheckpointError(f"{directory}: lm_head.weight is missing and the embeddings are not tied")
        model = CausalLM(config, embed, layers, norm, lm_head, device, dtype).eval()
        if on_layer is not None:
            on_layer(1.0)
        return LoadedModel(model, config, source.size_bytes())
    finally:
        source.close()


class _Builder:
    """Turns checkpoint tensors into modules, checking every shape against the config."""

    def __init__(
        self, config: ModelConfig, source: TensorSource, device: torch.device, dtype: torch.dtype, int4: bool | None
    ):
        self.config, self.source, self.device, self.dtype, self.int4 = config, source, device, dtype, int4

    def dense(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        tensor = self.source.get(name)
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"tensor {name!r} has shape {tuple(tensor.shape)}, the config implies {shape}")
        return tensor.to(self.device, self.dtype)

    def weight(self, prefix: str, out_features: int, in_features: int) -> Weight:
        stored = read_weight(self.source, self.config.quant, prefix, out_features, in_features)
        return stored if stored is not None else self.dense(f"{prefix}.weight", (out_features, in_features))

    def linear(self, prefix: str, out_features: int, in_features: int, bias: bool) -> torch.nn.Module:
        b = self.dense(f"{prefix}.bias", (out_features,)) if bias else None
        return make_linear(self.weight(prefix, out_features, in_features), b, self.device, self.dtype, self.int4)

    def fused(self, prefixes: list[str], outs: list[int], in_features: int, bias: bool) -> torch.nn.Module:
        weights = [self.weight(p, o, in_features) for p, o in zip(prefixes, outs, strict=True)]
        weight = fuse(weights, self.dtype, self.device)
        b = torch.cat([self.dense(f"{p}.bias", (o,)) for p, o in zip(prefixes, outs, strict=True)]) if bias else None
        return make_linear(weight, b, self.device, self.dtype, self.int4)

    def layer(self, i: int) -> DecoderLayer:
        c = self.config
        p = f"model.layers.{i}"
        h, q, kv = c.hidden_size, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        attn = f"{p}.self_attn"
        mlp = f"{p}.mlp"
        parts = {
            "input_norm": RMSNorm(self.dense(f"{p}.input_layernorm.weight", (h,)), c.rms_norm_eps),
            "qkv": self.fused([f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj"], [q, kv, kv], h, c.attention_bias),
            "o": self.linear(f"{attn}.o_proj", h, q, bias=False),
            "post_norm": RMSNorm(self.dense(f"{p}.post_attention_layernorm.weight", (h,)), c.rms_norm_eps),
            "mlp": SwiGLU(
                self.fused([f"{mlp}.gate_proj", f"{mlp}.up_proj"], [c.intermediate_size] * 2, h, bias=False),
                self.linear(f"{mlp}.down_proj", h, c.intermediate_size, bias=False),
            ),
        }
        if c.qk_norm:
            parts["q_norm"] = RMSNorm(self.dense(f"{attn}.q_norm.weight", (c.head_dim,)), c.rms_norm_eps)
            parts["k_norm"] = RMSNorm(self.dense(f"{attn}.k_norm.weight", (c.head_dim,)), c.rms_norm_eps)
        return DecoderLayer(c, parts)

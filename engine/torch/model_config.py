"""A Hugging Face model directory's config.json, read into the few numbers the engine needs.

Torch-free, so callers can inspect a directory without loading a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.torch.quant_config import (
    AWQ_GROUP_SIZES,
    AwqConfig,
    CheckpointError,
    Fp8Config,
    GptqConfig,
    QuantConfig,
    parse_quantization,
)
from models.formats.errors import InvalidModelFile
from models.formats.hf_config import read_json_document

__all__ = ["AWQ_GROUP_SIZES", "AwqConfig", "CheckpointError", "Fp8Config", "GptqConfig", "ModelConfig", "RopeConfig"]

# config.json "architectures" / "model_type" values this engine runs, and the family they map to.
SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",  # Qwen2 without q/k/v biases, plus an RMSNorm of each head's q and k
}

def read_json_file(path: Path, what: str) -> dict:
    """A model folder's JSON object file, with the limits `tailor plan` reads it with; else CheckpointError."""
    try:
        return read_json_document(path, what=what)[1]
    except InvalidModelFile as exc:
        raise CheckpointError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class RopeConfig:
    theta: float = 10000.0
    kind: str = "default"  # "default", "linear" or "llama3"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192


@dataclass(frozen=True, slots=True)
class ModelConfig:
    architecture: str  # as config.json names it, e.g. "LlamaForCausalLM"
    family: str  # "llama" or "qwen2"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool  # q/k/v projections carry a bias (always true for Qwen2)
    qk_norm: bool  # q and k are RMS-normalized per head before RoPE (Qwen3)
    torch_dtype: str  # "float32", "float16" or "bfloat16" as stored
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    quant: QuantConfig | None = None  # AWQ, GPTQ or FP8 (engine/torch/quant_config.py)

    @property
    def awq(self) -> AwqConfig | None:
        return self.quant if isinstance(self.quant, AwqConfig) else None

    @property
    def quant_label(self) -> str:
        """What ModelInfo adds to the family's name: " AWQ", " GPTQ 4-bit", " FP8", or nothing."""
        if isinstance(self.quant, GptqConfig):
            return f" GPTQ {self.quant.bits}-bit"
        return {AwqConfig: " AWQ", Fp8Config: " FP8"}.get(type(self.quant), "")

    @classmethod
    def from_dir(cls, directory: Path) -> ModelConfig:
        path = directory / "config.json"
        if not path.exists() and not path.is_symlink():
            raise CheckpointError(f"{directory}: no config.json, so this is not a Hugging Face model folder")
        return cls.from_dict(read_json_file(path, "config.json"), str(path))

    @classmethod
    def from_dict(cls, raw: dict, where: str = "config.json") -> ModelConfig:
        archs = raw.get("architectures") or []
        arch = archs[0] if archs else str(raw.get("model_type", "unknown"))
        family = SUPPORTED_ARCHITECTURES.get(arch)
        if family is None:
            names = ", ".join(sorted(SUPPORTED_ARCHITECTURES))
            raise CheckpointError(
                f"{where}: architecture {arch!r} is not supported by the PyTorch engine (supported: {names})"
            )
        try:
            hidden = int(raw["hidden_size"])
            heads = int(raw["num_attention_heads"])
            config = cls(
                architecture=arch,
                family=family,
                vocab_size=int(raw["vocab_size"]),
                hidden_size=hidden,
                intermediate_size=int(raw["intermediate_size"]),
                num_layers=int(raw["num_hidden_layers"]),
                num_heads=heads,
                num_kv_heads=int(raw.get("num_key_value_heads") or heads),
                head_dim=int(raw.get("head_dim") or hidden // heads),
                rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
                rope=_rope(raw, where),
                max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
                tie_word_embeddings=bool(raw.get("tie_word_embeddings", family != "llama")),
                attention_bias=family == "qwen2" or bool(raw.get("attention_bias", False)),
                qk_norm=family == "qwen3",
                torch_dtype=str(raw.get("torch_dtype") or raw.get("dtype") or "float32"),
                eos_token_ids=_ids(raw.get("eos_token_id")),
                bos_token_id=raw.get("bos_token_id") if isinstance(raw.get("bos_token_id"), int) else None,
                quant=parse_quantization(raw.get("quantization_config"), where),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: missing or malformed setting {exc}") from None
        if raw.get("mlp_bias"):
            raise CheckpointError(f"{where}: MLP biases are not supported by the PyTorch engine")
        if config.num_heads % config.num_kv_heads:
            raise CheckpointError(f"{where}: {config.num_heads} heads do not split into {config.num_kv_heads} KV heads")
        return config


def _ids(value: object) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, int))
    return ()


def _rope(raw: dict, where: str) -> RopeConfig:
    # transformers 5 writes "rope_parameters" (theta included); older configs "rope_theta" + "rope_scaling".
    params = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    theta = float(params.get("rope_theta") or raw.get("rope_theta") or 10000.0)
    kind = str(params.get("rope_type") or params.get("type") or "default")
    if kind == "default":
        return RopeConfig(theta=theta)
    if kind == "linear":
        return RopeConfig(theta=theta, kind=kind, factor=float(params["factor"]))
    if kind == "llama3":
        return RopeConfig(
            theta=theta,
            kind=kind,
            factor=float(params["factor"]),
            low_freq_factor=float(params.get("low_freq_factor", 1.0)),
            high_freq_factor=float(params.get("high_freq_factor", 4.0)),
            original_max_position=int(params.get("original_max_position_embeddings", 8192)),
        )
    raise CheckpointError(f"{where}: RoPE scaling {kind!r} is not supported by the PyTorch engine")

"""Read small JSON documents of a Hugging Face checkpoint (config.json) from a path or URL.

`read_json_document` is the one reader of a checkpoint's JSON files (config.json, the shard index,
tokenizer_config.json, generation_config.json) for the planner and both engines, so every caller
has the same limits: at most `MAX_JSON_BYTES` read (a larger file is refused before its bytes are
read), nesting at most `MAX_JSON_DEPTH` deep, no duplicate keys, and only regular files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

from models.formats.byte_source import DEFAULT_TIMEOUT_S, ByteSource, open_byte_source
from models.formats.errors import InvalidModelFile

MAX_JSON_BYTES = 64 << 20
# Real checkpoint files nest 3 to 5 levels; json's C parser recurses on the stack and raises a bare
# RecursionError around 1000, sooner in a deep call stack, so the limit is checked before parsing.
MAX_JSON_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))


def json_depth(raw: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count)."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def _no_duplicates(name: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise InvalidModelFile(name, f"duplicate JSON key {key!r}")
            result[key] = value
        return result

    return hook


def parse_json_object(name: str, raw: bytes, what: str) -> dict[str, Any]:
    """Decode `raw` as one JSON object, refusing bad UTF-8, bad JSON, deep nesting and duplicate keys."""
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise InvalidModelFile(name, f"{what} nests JSON too deeply ({depth} levels; the limit is {MAX_JSON_DEPTH})")
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates(name))
    except UnicodeDecodeError as exc:
        raise InvalidModelFile(name, f"{what} is not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InvalidModelFile(name, f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidModelFile(name, f"{what} nests JSON too deeply") from None
    if not isinstance(value, dict):
        raise InvalidModelFile(name, f"{what} is a JSON {type(value).__name__}, not an object")
    return value


def read_json_document(
    source: str | Path | ByteSource, headers: dict[str, str] | None = None, what: str = "the file",
    max_bytes: int = MAX_JSON_BYTES, timeout: float = DEFAULT_TIMEOUT_S,
) -> tuple[str, dict[str, Any]]:
    """The name and JSON object of a whole (small) file or URL."""
    byte_source = open_byte_source(source, headers=headers, timeout=timeout)
    try:
        if byte_source.size is not None and byte_source.size > max_bytes:  # refused unread
            raise InvalidModelFile(byte_source.name, f"{what} is larger than {max_bytes >> 20} MiB "
                                                     f"({byte_source.size:,} bytes); refusing to read it")
        raw = bytearray()
        while len(raw) <= max_bytes and (chunk := byte_source.read(len(raw), 1 << 20)):
            raw += chunk
    finally:
        if byte_source is not source:
            byte_source.close()
    if len(raw) > max_bytes:
        raise InvalidModelFile(byte_source.name, f"{what} is larger than {max_bytes >> 20} MiB; refusing to read it")
    return byte_source.name, parse_json_object(byte_source.name, bytes(raw), what)


@dataclass(slots=True, frozen=True)
class QuantizationConfig:
    """`quantization_config` of a checkpoint (AWQ, GPTQ, FP8...)."""

    quant_method: str
    bits: int | None
    group_size: int | None


@dataclass(slots=True, frozen=True)
class HfConfig:
    """The shape of a model, from its `config.json` (the text model's part for multimodal ones).

    Attributes:
        architecture: `architectures[0]`, e.g. `LlamaForCausalLM`.
        model_type: e.g. `llama`.
        head_dim: `head_dim`, else hidden_size / n_heads.
        n_kv_heads: `num_key_value_heads`, else n_heads.
        raw: The whole document.
    """

    architecture: str | None
    model_type: str | None
    n_layers: int | None
    n_heads: int | None
    n_kv_heads: int | None
    head_dim: int | None
    hidden_size: int | None
    intermediate_size: int | None
    vocab_size: int | None
    max_position_embeddings: int | None
    sliding_window: int | None
    torch_dtype: str | None
    quantization: QuantizationConfig | None
    raw: dict[str, Any]


def _int(cfg: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _quantization(quant: dict[str, Any]) -> QuantizationConfig:
    """The method, bits and group size; compressed-tensors FP8 weights are called "fp8", as they run alike."""
    method = str(quant.get("quant_method", "unknown")).lower()
    if method == "compressed-tensors":
        groups = quant.get("config_groups")
        first = next(iter(groups.values()), None) if isinstance(groups, dict) else None
        weights = first.get("weights") if isinstance(first, dict) else None
        if isinstance(weights, dict) and weights.get("type") == "float" and weights.get("num_bits") == 8:
            return QuantizationConfig("fp8", 8, None)
        bits = _int(weights, "num_bits") if isinstance(weights, dict) else None
        return QuantizationConfig(method, bits, _int(weights, "group_size") if isinstance(weights, dict) else None)
    bits = _int(quant, "bits", "w_bit", "weight_bits") or (8 if method == "fp8" else None)
    return QuantizationConfig(method, bits, _int(quant, "group_size", "q_group_size"))


def hf_config_from_dict(name: str, doc: dict[str, Any]) -> HfConfig:
    """Interpret a parsed config.json; `name` is used in errors."""
    text = doc.get("text_config")
    cfg = {**doc, **text} if isinstance(text, dict) and "num_hidden_layers" not in doc else doc
    archs = doc.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise InvalidModelFile(name, f"config.json: architectures must be a list of names, not {archs!r}")
    n_heads = _int(cfg, "num_attention_heads", "n_head")
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    head_dim = _int(cfg, "head_dim") or (hidden // n_heads if hidden and n_heads else None)
    quant = doc.get("quantization_config") or cfg.get("quantization_config")
    quantization = None
    if isinstance(quant, dict):
        quantization = _quantization(quant)
    dtype = cfg.get("torch_dtype", cfg.get("dtype"))
    return HfConfig(
        architecture=archs[0] if archs else None,
        model_type=cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else None,
        n_layers=_int(cfg, "num_hidden_layers", "n_layer"),
        n_heads=n_heads,
        n_kv_heads=_int(cfg, "num_key_value_heads") or n_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=_int(cfg, "intermediate_size", "n_inner"),
        vocab_size=_int(cfg, "vocab_size"),
        max_position_embeddings=_int(cfg, "max_position_embeddings", "n_positions"),
        sliding_window=_int(cfg, "sliding_window"),
        torch_dtype=dtype if isinstance(dtype, str) else None,
        quantization=quantization,
        raw=doc,
    )


def read_hf_config(
    source: str | Path | ByteSource, headers: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> HfConfig:
    """Read a checkpoint's config.json from a path or URL.

    Raises:
        InvalidModelFile: Missing, unreachable, not JSON, or not an object.
    """
    name, doc = read_json_document(source, headers, "config.json", timeout=timeout)
    return hf_config_from_dict(name, doc)

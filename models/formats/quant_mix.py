"""The usual mix of tensor types in the repeating layers of each GGUF quantization level.

A repo's files differ in tensor types only, and the plan reads one header per repo; for the
other files it needs the share of their layer bytes in each ggml type (the CPU repacks some
types and not others). These shares follow llama.cpp's quantizer (src/llama-quant.cpp,
`llama_tensor_get_type`) on a llama-shaped model with grouped-query attention, where the
projections are about 8% (q, o), 2% (k, v) and 27% (gate, up, down) of a layer's weights:
Q4_K_M, for instance, gives half of the layers' `attn_v` and `ffn_down` Q6_K ("use_more_bits")
and the rest Q4_K, which by bytes is 80% Q4_K. The file the user loads is forecast from its own
header, never from this table.
"""

from __future__ import annotations

from models.formats.ggml_types import GGML_TYPES

_ID = {t.name: i for i, t in GGML_TYPES.items()}

# Level -> {tensor type: share of the repeating layers' bytes}.
LAYER_TYPE_SHARES: dict[str, dict[str, float]] = {
    "F32": {"F32": 1.0},
    "F16": {"F16": 1.0},
    "BF16": {"BF16": 1.0},
    "Q8_0": {"Q8_0": 1.0},
    "Q6_K": {"Q6_K": 1.0},
    "Q5_K_M": {"Q5_K": 0.83, "Q6_K": 0.17},
    "Q5_K_S": {"Q5_K": 1.0},
    "Q5_1": {"Q5_1": 1.0},
    "Q5_0": {"Q5_0": 1.0},
    "Q4_K_M": {"Q4_K": 0.80, "Q6_K": 0.20},
    "Q4_K_S": {"Q4_K": 0.95, "Q5_K": 0.05},
    "Q4_1": {"Q4_1": 1.0},
    "Q4_0": {"Q4_0": 1.0},
    "IQ4_NL": {"IQ4_NL": 1.0},
    "IQ4_XS": {"IQ4_XS": 1.0},
    "Q3_K_L": {"Q3_K": 0.60, "Q5_K": 0.40},
    "Q3_K_M": {"Q3_K": 0.78, "Q4_K": 0.17, "Q5_K": 0.05},
    "Q3_K_S": {"Q3_K": 1.0},
    "Q2_K": {"Q2_K": 0.70, "Q3_K": 0.28, "Q4_K": 0.02},
    "Q2_K_S": {"Q2_K": 0.90, "Q4_K": 0.10},
    "MXFP4_MOE": {"MXFP4": 0.90, "Q8_0": 0.10},
}


def estimated_layer_parts(quant: str | None, layer_bytes: int) -> tuple[tuple[int, int], ...]:
    """(ggml type, bytes) of a repeating layer of `layer_bytes` in a file of level `quant`; () if unknown."""
    shares = LAYER_TYPE_SHARES.get((quant or "").upper(), {})
    return tuple(sorted((_ID[name], int(layer_bytes * share)) for name, share in shares.items()))


def estimated_output_type(quant: str | None) -> int | None:
    """The ggml type llama.cpp's quantizer gives the output matrix at level `quant` (Q6_K below Q8_0)."""
    name = (quant or "").upper()
    if name in ("F32", "F16", "BF16", "Q8_0"):
        return _ID[name]
    return _ID["Q6_K"] if name in LAYER_TYPE_SHARES else None

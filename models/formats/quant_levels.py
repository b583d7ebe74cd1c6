"""Quantization levels of GGUF files: names in file names, and their order of quality."""

from __future__ import annotations

import re

# Approximate bits per weight of each level (llama.cpp's quantize table); higher is better.
BITS_PER_WEIGHT: dict[str, float] = {
    "F32": 32.0,
    "BF16": 16.0,
    "F16": 16.0,
    "Q8_0": 8.5,
    "Q6_K": 6.56,
    "Q5_K_M": 5.69,
    "Q5_K_S": 5.54,
    "Q5_1": 6.0,
    "Q5_0": 5.5,
    "Q4_K_M": 4.89,
    "Q4_K_S": 4.58,
    "Q4_1": 5.0,
    "Q4_0": 4.5,
    "IQ4_NL": 4.5,
    "IQ4_XS": 4.25,
    "Q3_K_L": 4.27,
    "Q3_K_M": 3.91,
    "IQ3_M": 3.66,
    "IQ3_S": 3.44,
    "Q3_K_S": 3.5,
    "IQ3_XS": 3.3,
    "IQ3_XXS": 3.06,
    "Q2_K": 3.0,
    "Q2_K_S": 2.96,
    "IQ2_M": 2.7,
    "IQ2_S": 2.5,
    "IQ2_XS": 2.31,
    "IQ2_XXS": 2.06,
    "IQ1_M": 1.75,
    "IQ1_S": 1.56,
    # Newer types (bits from their block layout in ggml): gpt-oss's MXFP4 experts, NVIDIA's FP4,
    # the ternary TQ types, and llama.cpp's 2- and 1-bit Q2_0 (64 values in 18 bytes) and Q1_0.
    "MXFP4_MOE": 4.25,
    "MXFP4": 4.25,
    "NVFP4": 4.5,
    "TQ2_0": 2.06,
    "TQ1_0": 1.69,
    "Q2_0": 2.25,
    "Q1_0": 1.13,
}
# The guide's order puts F16 above Q8_0 and K-quants above legacy ones of similar size.
_PREFERENCE = ["F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q3_K_M", "Q2_K"]
CPU_DEFAULT = "Q4_K_M"

_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(sorted(BITS_PER_WEIGHT, key=len, reverse=True)) + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def quant_from_name(file_name: str) -> str | None:
    """The quantization level a file name states (`...-Q4_K_M.gguf` → `Q4_K_M`), if any."""
    matches = _QUANT_RE.findall(file_name.replace(".", "-"))
    return matches[-1].upper() if matches else None


def quality_key(quant: str | None) -> tuple[float, float]:
    """Sort key, higher is better: the guide's order first, then bits per weight."""
    if quant is None:
        return (-1.0, 0.0)
    try:
        rank = len(_PREFERENCE) - _PREFERENCE.index(quant)
    except ValueError:
        # Levels the guide does not list sit where their bits per weight put them.
        bits = BITS_PER_WEIGHT.get(quant, 0.0)
        rank = sum(1 for q in _PREFERENCE if BITS_PER_WEIGHT[q] < bits) + 0.5
    return (float(rank), BITS_PER_WEIGHT.get(quant, 0.0))

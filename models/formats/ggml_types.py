"""ggml tensor types (block size, bytes per block) and llama.cpp file types (`general.file_type`)."""

from __future__ import annotations

from typing import NamedTuple

QK_K = 256  # elements in one super-block of the K-quants and most IQ types


class GgmlType(NamedTuple):
    """One ggml tensor type: `block_size` elements are stored in `type_size` bytes."""

    name: str
    block_size: int
    type_size: int


# Type id -> layout, following ggml's type traits; tests/models/formats/test_ggml_types.py compares it
# with the installed libggml, so a llama.cpp that learns a new type fails a test. Ids 4, 5
# (Q4_2, Q4_3) and 31-33, 36-38 (repacked Q4_0 variants, IQ4_NL_x) were removed from files and
# are refused (ggml gives them a block size of 0).
GGML_TYPES: dict[int, GgmlType] = {
    0: GgmlType("F32", 1, 4),
    1: GgmlType("F16", 1, 2),
    2: GgmlType("Q4_0", 32, 2 + 32 // 2),  # fp16 scale + 32 nibbles
    3: GgmlType("Q4_1", 32, 2 * 2 + 32 // 2),  # fp16 scale and min + 32 nibbles
    6: GgmlType("Q5_0", 32, 2 + 4 + 32 // 2),  # + 32 high bits
    7: GgmlType("Q5_1", 32, 2 * 2 + 4 + 32 // 2),
    8: GgmlType("Q8_0", 32, 2 + 32),
    9: GgmlType("Q8_1", 32, 2 * 2 + 32),  # fp16 scale and sum (36 bytes, not fp32's 40)
    10: GgmlType("Q2_K", QK_K, QK_K // 16 + QK_K // 4 + 2 * 2),
    11: GgmlType("Q3_K", QK_K, QK_K // 8 + QK_K // 4 + 12 + 2),
    12: GgmlType("Q4_K", QK_K, 2 * 2 + 12 + QK_K // 2),
    13: GgmlType("Q5_K", QK_K, 2 * 2 + 12 + QK_K // 8 + QK_K // 2),
    14: GgmlType("Q6_K", QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + 2),
    15: GgmlType("Q8_K", QK_K, 4 + QK_K + QK_K // 16 * 2),  # fp32 d, int8 qs, int16 bsums
    16: GgmlType("IQ2_XXS", QK_K, 2 + QK_K // 8 * 2),
    17: GgmlType("IQ2_XS", QK_K, 2 + QK_K // 8 * 2 + QK_K // 32),
    18: GgmlType("IQ3_XXS", QK_K, 2 + 3 * QK_K // 8),
    19: GgmlType("IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),
    20: GgmlType("IQ4_NL", 32, 2 + 32 // 2),
    21: GgmlType("IQ3_S", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    22: GgmlType("IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),
    23: GgmlType("IQ4_XS", QK_K, 2 + 2 + QK_K // 64 + QK_K // 2),
    24: GgmlType("I8", 1, 1),
    25: GgmlType("I16", 1, 2),
    26: GgmlType("I32", 1, 4),
    27: GgmlType("I64", 1, 8),
    28: GgmlType("F64", 1, 8),
    29: GgmlType("IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),  # scale packed in the scales
    30: GgmlType("BF16", 1, 2),
    34: GgmlType("TQ1_0", QK_K, (QK_K - 4 * QK_K // 64) // 5 + QK_K // 64 + 2),
    35: GgmlType("TQ2_0", QK_K, QK_K // 4 + 2),
    39: GgmlType("MXFP4", 32, 1 + 32 // 2),  # e8m0 shared exponent + 32 fp4 values
    40: GgmlType("NVFP4", 64, 4 + 64 // 2),  # four fp8 sub-block scales + 64 fp4 values
    41: GgmlType("Q1_0", 128, 2 + 128 // 8),  # fp16 scale + 128 sign bits
    42: GgmlType("Q2_0", 64, 2 + 64 // 4),  # fp16 scale + 64 2-bit values
}

# llama.cpp's llama_ftype (the `general.file_type` key) -> the name of the quantization, as in
# the enum's LLAMA_FTYPE_MOSTLY_<name> (ALL_F32 is F32). Ids 4-6 and 33-35 were removed.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}  # fmt: skip


def tensor_nbytes(type_id: int, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of `type_id` and `shape` (shape[0] a multiple of the block size)."""
    block_size, type_size = GGML_TYPES[type_id][1:]
    n = 1
    for dim in shape:
        n *= dim
    return n // block_size * type_size

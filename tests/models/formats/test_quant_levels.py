"""Quantization levels named in file names, including the types llama.cpp added lately."""

from __future__ import annotations

import pytest

from models.formats.ggml_types import FILE_TYPES
from models.formats.quant_levels import BITS_PER_WEIGHT, quality_key, quant_from_name


@pytest.mark.parametrize(("name", "level"), [
    ("gpt-oss-20b-MXFP4_MOE.gguf", "MXFP4_MOE"),
    ("Bonsai-8B-Q1_0.gguf", "Q1_0"),
    ("model-Q2_0.gguf", "Q2_0"),
    ("BitNet-b1.58-TQ2_0.gguf", "TQ2_0"),
    ("Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
    ("Qwen3-0.6B-IQ4_XS.gguf", "IQ4_XS"),
])
def test_the_level_a_file_name_states(name, level):
    assert quant_from_name(name) == level


def test_every_file_type_llama_cpp_names_has_bits_per_weight():
    # A level without bits sorts below everything: the plan would never pick it for its size.
    assert set(FILE_TYPES.values()) <= set(BITS_PER_WEIGHT)
    assert quality_key("Q4_K_M") > quality_key("Q2_0") > quality_key("Q1_0")

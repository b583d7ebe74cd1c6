"""Torch engine tests run torch on one thread: the ops of tiny models are too small to split, and on a
busy two-core machine OpenMP's waiting threads make every op hundreds of times slower."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def starter_two_layers(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter model (SmolLM2-135M) as a dense fp32 Hugging Face folder, cut to its first two layers:
    real weights for the quantized-checkpoint tests, small enough to quantize many times."""
    from tests.fixtures.gguf_to_hf import convert
    from tests.fixtures.tiny_quant import first_layers_copy

    whole = tmp_path_factory.mktemp("starter-dense")
    convert(starter_model, whole)
    cut = first_layers_copy(whole, tmp_path_factory.mktemp("starter-2-layers"), 2)
    shutil.rmtree(whole, ignore_errors=True)  # 0.5 GB of fp32
    return cut

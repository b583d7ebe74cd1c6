"""The memory forecast against what llama.cpp itself allocates, and its placement rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.formats.gguf_header import read_gguf_header
from models.plan.forecast import ForecastSettings, forecast, padded_context, shape_from_gguf
from tests.bench.forecast_accuracy import models, relative_error, rows

TOLERANCE = 0.05


@pytest.fixture(scope="module")
def starter_shape(starter_model: Path):
    return shape_from_gguf(read_gguf_header(starter_model))


def test_each_part_is_within_5_percent_of_llama_cpp(tmp_path: Path):
    files = models(tmp_path, families=False)  # the families: tests/models/plan/test_forecast_families.py
    cases = list(rows(files, contexts=(2048, 8192), kv_configs=(("f16", False), ("q8_0", True))))
    assert len(cases) == 12
    for name, settings, parts in cases:
        for part, (predicted, actual) in parts.items():
            assert actual > 0, (name, part)
            assert relative_error(predicted, actual) <= TOLERANCE, (name, settings, part, predicted, actual)


def test_weights_and_kv_of_the_starter_model_are_exact(starter_shape):
    cpu = forecast(starter_shape, ForecastSettings(n_ctx=4096)).devices["cpu"]
    # 30 layers x 4096 cells x (3 KV heads x 64) x (K + V) x 2 bytes
    assert cpu.kv_cache_bytes == 30 * 4096 * 192 * 2 * 2
    assert starter_shape.output_tied  # SmolLM2 reuses its token embedding as output


def test_context_is_padded_like_llama_cpp():
    assert padded_context(2048) == 2048
    assert padded_context(3000) == 3072


def test_partial_offload_puts_the_output_layer_first_then_the_last_layers_and_their_kv_on_the_gpu(starter_shape):
    # llama.cpp offloads the output layer first: 10 GPU layers are the output and the last 9.
    s = ForecastSettings(n_ctx=4096, n_gpu_layers=10)
    f = forecast(starter_shape, s)
    gpu, cpu = f.devices["cuda:0"], f.devices["cpu"]
    per_layer = starter_shape.layer_weight_bytes[0]
    # SmolLM2's output is its token embedding, copied to the GPU as the output matrix.
    assert gpu.weights_bytes == 9 * per_layer + starter_shape.output_weight_bytes + starter_shape.input_weight_bytes
    assert cpu.weights_bytes == 21 * per_layer + starter_shape.input_weight_bytes
    assert gpu.kv_cache_bytes * 21 == cpu.kv_cache_bytes * 9  # 9 vs 21 layers
    assert gpu.compute_bytes > cpu.compute_bytes  # the logits go with the output layer to the GPU
    one = forecast(starter_shape, ForecastSettings(n_ctx=4096, n_gpu_layers=1)).devices
    assert one["cuda:0"].kv_cache_bytes == 0 and one["cpu"].kv_cache_bytes == cpu.kv_cache_bytes * 30 // 21


def test_full_offload_copies_a_tied_embedding_to_the_gpu(starter_shape):
    f = forecast(starter_shape, ForecastSettings(n_ctx=4096, n_gpu_layers=999))
    gpu = f.devices["cuda:0"]
    expected = sum(starter_shape.layer_weight_bytes) + starter_shape.output_weight_bytes + starter_shape.input_weight_bytes
    assert gpu.weights_bytes == expected
    assert f.devices["cpu"].weights_bytes == starter_shape.input_weight_bytes


def test_unknown_kv_type_is_a_clear_error(starter_shape):
    with pytest.raises(ValueError, match="unknown KV cache type 'q3'"):
        forecast(starter_shape, ForecastSettings(n_ctx=2048, kv_type="q3"))


def test_the_paged_engine_rounds_kv_to_whole_blocks_and_keeps_logits_of_one_token(starter_shape):
    paged = ForecastSettings(n_ctx=1000, n_gpu_layers=999, paged_block_size=16, n_ubatch=512)
    gpu = forecast(starter_shape, paged).devices["cuda:0"]
    assert gpu.kv_cache_bytes == 30 * 1008 * 192 * 2 * 2  # 63 blocks of 16 tokens
    n_ff = starter_shape.n_ff
    assert n_ff == 1536
    assert gpu.compute_bytes == 512 * (4 * 576 + 3 * n_ff) * 2 + 49152 * 4
    # llama.cpp would pad the same context to 1024 cells and keep a whole ubatch of logits.
    llama = forecast(starter_shape, ForecastSettings(n_ctx=1000, n_gpu_layers=999)).devices["cuda:0"]
    assert llama.kv_cache_bytes == 30 * 1024 * 192 * 2 * 2
    assert llama.compute_bytes > gpu.compute_bytes

"""The plan's split over several GPUs reaches llama.cpp: a real load here, and on a machine with two GPUs
each card's buffers against the forecast."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import llama_cpp
import pytest

from engine.backend import BackendError
from engine.gguf.backend import GgufBackend
from engine.gguf.devices import read_devices
from engine.gguf.memory_report import parts_by_device
from engine.protocol import ChatMessage, LoadRequest, SamplingParams
from models.formats.gguf_header import read_gguf_header
from models.plan.forecast import ForecastSettings, forecast, shape_from_gguf
from tests.engine.helpers import reply

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, seed=1)
FRANCE = [ChatMessage("user", "What is the capital of France?")]


def test_the_split_is_handed_to_llama_cpp(backend: GgufBackend, starter_model: Path):
    plain = LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, prefix_cache_bytes=0)
    backend.load(plain)
    assert backend._llama.tensor_split is None  # no split asked for: llama.cpp's own
    expected = reply(backend, FRANCE, GREEDY).text
    backend.load(replace(plain, tensor_split=(0.6, 0.4)))
    assert backend._llama.tensor_split == [0.6, 0.4]
    split = backend._llama.model_params.tensor_split
    assert (split[0], split[1], split[2]) == pytest.approx((0.6, 0.4, 0.0))  # the rest of LLAMA_MAX_DEVICES: 0
    # Where the layers stay on the CPU the split changes nothing: the same greedy reply.
    if not llama_cpp.llama_supports_gpu_offload():
        assert reply(backend, FRANCE, GREEDY).text == expected


@pytest.mark.parametrize(("split", "words"), [((0.5, -0.5), "not negative"), ((0.0, 0.0), "all zero"),
                                              ((0.1,) * 17, "at most 16 GPUs")])
def test_a_bad_split_is_refused_before_loading(backend: GgufBackend, starter_model: Path, split, words):
    with pytest.raises(BackendError) as caught:
        backend.load(LoadRequest(str(starter_model), n_ctx=2048, tensor_split=split))
    assert caught.value.kind == "bad_request" and "tensor_split" in str(caught.value)
    assert words in str(caught.value)


def _cuda_devices() -> int:
    return sum(1 for d in read_devices().gpus if d.is_cuda) if llama_cpp.llama_supports_gpu_offload() else 0


@pytest.mark.gpu
def test_two_gpus_hold_the_layers_the_forecast_gives_each(backend: GgufBackend, starter_model: Path):
    if _cuda_devices() < 2:  # asked after the backend fixture loaded llama.cpp's backends
        pytest.skip("needs llama.cpp with two CUDA devices")
    split = (0.5, 0.5)
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_gpu_layers=31, tensor_split=split))
    real = parts_by_device(backend._logs.buffers)
    predicted = forecast(shape_from_gguf(read_gguf_header(starter_model)),
                         ForecastSettings(n_ctx=2048, n_gpu_layers=31, tensor_split=split))
    for device in ("cuda:0", "cuda:1"):
        want = predicted.devices[device]
        assert real[device]["weights"] == pytest.approx(want.weights_bytes, rel=0.05), device
        assert real[device]["kv"] == pytest.approx(want.kv_cache_bytes, rel=0.05), device
    assert reply(backend, FRANCE, GREEDY).stats.gen_tokens > 0

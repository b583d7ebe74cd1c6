"""The plan's GPU layers cannot be had at load: fewer layers, then the CPU, and one line that says so."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from engine.client import EngineClient
from engine.device_probe import gpu_backend_installed
from engine.gguf.offload_fallback import fallback_notice, is_out_of_memory, layer_attempts, next_attempt
from engine.protocol import ChatMessage, Done, Loaded, LoadRequest, SamplingParams
from tests.engine.helpers import collect, wait_for

# What ggml-cuda and llama.cpp log when VRAM runs out while a model loads.
CUDA_OOM_LOG = (
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory",
    "alloc_tensor_range: failed to allocate CUDA0 buffer of size 4294967296",
    "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
)


@contextlib.contextmanager
def _engine(tmp_path: Path) -> Iterator[EngineClient]:
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    try:
        yield client
    finally:
        client.shutdown()


def test_the_attempts_go_from_the_plan_to_half_to_none():
    assert layer_attempts(31, gpu_usable=True) == [31, 15, 0]
    assert layer_attempts(1, gpu_usable=True) == [1, 0]
    assert layer_attempts(31, gpu_usable=False) == [0]
    assert layer_attempts(0, gpu_usable=True) == [0]


def test_out_of_memory_tries_fewer_layers_and_any_other_gpu_failure_goes_to_the_cpu():
    attempts = layer_attempts(31, gpu_usable=True)
    assert is_out_of_memory(CUDA_OOM_LOG) and not is_out_of_memory(["llama_model_load: error loading model: bad magic"])
    assert next_attempt(attempts, 31, out_of_memory=True) == 15
    assert next_attempt(attempts, 15, out_of_memory=True) == 0
    assert next_attempt(attempts, 31, out_of_memory=False) == 0
    assert next_attempt(attempts, 0, out_of_memory=True) is None


def test_each_fallback_is_one_plain_line():
    assert fallback_notice(31, 31, gpu_usable=True) is None
    assert "finds no GPU it can use now" in fallback_notice(31, 0, gpu_usable=False)
    assert fallback_notice(31, 15, True, "out of memory").startswith("Out of GPU memory with 31 layers")
    assert "(CUDA error: device lost)" in fallback_notice(31, 0, True, "CUDA error: device lost")


@pytest.mark.skipif(gpu_backend_installed(), reason="needs a llama.cpp without a GPU backend")
def test_a_plan_with_gpu_layers_loads_on_the_cpu_when_llama_cpp_finds_no_gpu(starter_model: Path, tmp_path: Path):
    """What a driver reset between plan and load, or CUDA_VISIBLE_DEVICES="", looks like to the engine."""
    with _engine(tmp_path) as client:
        client.load(LoadRequest(str(starter_model), n_ctx=2048, n_gpu_layers=31))
        loaded = wait_for(client, (Loaded,))
        assert isinstance(loaded, Loaded), loaded
        assert loaded.info.notice is not None and "31 layers on the GPU" in loaded.info.notice
        assert "runs on the CPU" in loaded.info.notice
        france = [ChatMessage("system", DEFAULT_SYSTEM_PROMPT), ChatMessage("user", "What is the capital of France?")]
        reply = collect(client, client.generate(france, SamplingParams(temperature=0.0, max_tokens=48, seed=1)))
        assert isinstance(reply.end, Done) and "Paris" in reply.text


def test_a_plan_on_the_cpu_has_no_notice(starter_model: Path, tmp_path: Path):
    with _engine(tmp_path) as client:
        client.load(LoadRequest(str(starter_model), n_ctx=2048, n_gpu_layers=0))
        loaded = wait_for(client, (Loaded,))
        assert isinstance(loaded, Loaded) and loaded.info.notice is None

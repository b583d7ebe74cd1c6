"""A saved prefix belongs to the settings that shape the KV cache: after a flash-attention or
GPU-layers change it is never reused, from RAM or from disk (the README's promise); with the
same settings again it is, so the misses are the setting's doing, not a cold cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import llama_cpp
import pytest

from engine.gguf.backend import GgufBackend
from engine.protocol import ChatMessage, Done, LoadRequest, SamplingParams
from tests.engine.helpers import reply

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, seed=1)
A = [ChatMessage("system", "You are a geography tutor. " * 20), ChatMessage("user", "What is the capital of France?")]
B = [ChatMessage("system", "You are a chemistry tutor. " * 20), ChatMessage("user", "What is water made of?")]
GPU = pytest.mark.skipif(not llama_cpp.llama_supports_gpu_offload(), reason="this llama.cpp cannot offload to a GPU")
CHANGES = {"flash attention off": {"flash_attn": False}, "one layer on the GPU": {"n_gpu_layers": 1}}
# GPU layers change a state only where llama.cpp really offloads them (elsewhere every load uses 0).
CASES = [pytest.param("flash attention off"), pytest.param("one layer on the GPU", marks=[pytest.mark.gpu, GPU])]


def _base(starter_model: Path, **extra: object) -> LoadRequest:
    return LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, flash_attn=True, n_gpu_layers=0, **extra)


def _ask(backend: GgufBackend, messages: list[ChatMessage]) -> Done:
    return reply(backend, messages, GREEDY)


@pytest.mark.parametrize("change", CASES)
def test_a_changed_setting_never_reuses_a_state_kept_in_ram(backend: GgufBackend, starter_model: Path, change: str):
    base = _base(starter_model)
    backend.load(base)
    first = _ask(backend, A)
    _ask(backend, B)  # A's state leaves the context for the RAM tier
    backend.load(replace(base, **CHANGES[change]))
    assert len(backend._cache) >= 1  # the state is there, under the old settings
    assert _ask(backend, A).stats.cached_tokens == 0
    backend.load(base)
    assert _ask(backend, A).stats.cached_tokens == first.stats.prompt_tokens - 1


@pytest.mark.parametrize("change", CASES)
def test_a_changed_setting_never_reuses_a_state_saved_on_disk(backend: GgufBackend, starter_model: Path,
                                                              tmp_path: Path, change: str):
    base = _base(starter_model, prefix_cache_dir=str(tmp_path / "prefix-cache"))

    def fresh(request: LoadRequest) -> GgufBackend:
        # A new backend, as after a restart: an empty RAM tier, the disk tier only. llama.cpp has
        # one log callback per process, so it shares the module backend's bridge.
        other = GgufBackend(backend._logs)
        other.load(request)
        return other

    first_run = fresh(base)
    try:
        first = _ask(first_run, A)
    finally:
        first_run.close()  # what the context held is written to disk
    assert list((tmp_path / "prefix-cache").iterdir())
    changed = fresh(replace(base, **CHANGES[change]))
    try:
        assert _ask(changed, A).stats.cached_tokens == 0
    finally:
        changed.close()
    same = fresh(base)
    try:
        assert _ask(same, A).stats.cached_tokens >= first.stats.prompt_tokens - 1
    finally:
        same.close()


def test_states_are_filed_under_the_gpu_layers_really_used(backend: GgufBackend, starter_model: Path):
    """The key holds the layers llama.cpp was given, not those asked for: on a CPU-only build a
    plan's GPU layers all run on the CPU, and the state is the same as with none."""
    backend.load(replace(_base(starter_model), n_gpu_layers=1))
    used = 1 if llama_cpp.llama_supports_gpu_offload() else 0
    assert backend._cache_key is not None and backend._cache_key.settings.endswith(f";ngl={used}")
    assert ";fa=1;" in backend._cache_key.settings

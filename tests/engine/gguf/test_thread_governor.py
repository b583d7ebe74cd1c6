"""The GGUF engine decodes on as many threads as there are free cores: llama.cpp's threads wait for each other
at every op, so one that shares its core with another program holds all of them up. A real busy program
takes threads from the next reply; threads the user chose are kept."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import llama_cpp
import psutil
import pytest

from engine.gguf.backend import GgufBackend
from engine.gguf.llama_handle import LlamaHandle
from engine.gguf.log_bridge import LlamaLogBridge
from engine.openmp_policy import ThreadGovernor
from engine.protocol import ChatMessage, LoadRequest, SamplingParams
from engine.starter import starter_model_path
from tests.engine.helpers import reply

SHORT = SamplingParams(temperature=0.0, max_tokens=4)
ASK = [ChatMessage("user", "Hi")]


def _threads(llama: LlamaHandle) -> tuple[int, int]:
    """(decode, prefill) threads of the context, as llama.cpp has them."""
    context = llama.context_pointer
    return int(llama_cpp.llama_n_threads(context)), int(llama_cpp.llama_n_threads_batch(context))


def _backend(n_threads: int | None) -> GgufBackend:
    backend = GgufBackend(LlamaLogBridge())
    backend.load(LoadRequest(str(starter_model_path()), n_ctx=512, n_threads=n_threads, prefix_cache_bytes=0))
    return backend


@contextmanager
def _busy_cores() -> Iterator[None]:
    """Programs spinning on every core but one, for as long as the block runs (and long enough to be seen)."""
    logical = psutil.cpu_count() or 1
    code = "while True: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(max(1, logical - 1))]
    try:
        time.sleep(ThreadGovernor.LOOK_S * 2)  # their CPU time accrues (the governor reads the counters)
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture(scope="module")
def two_cores() -> None:
    if (psutil.cpu_count() or 1) < 2:
        pytest.skip("one CPU: there are no threads to take")


def test_the_handle_sets_both_counts_never_above_its_own(two_cores: None):
    backend = _backend(None)
    llama = backend._llama
    full = _threads(llama)
    try:
        llama.set_threads(1)
        assert _threads(llama) == (1, 1)
        llama.set_threads(1000)
        assert _threads(llama) == full == (llama.context_params.n_threads, llama.context_params.n_threads_batch)
    finally:
        backend.close()


def test_a_busy_program_takes_threads_from_the_next_reply(two_cores: None):
    backend = _backend(None)
    full = _threads(backend._llama)
    try:
        with _busy_cores():
            reply(backend, ASK, SHORT)
            busy = _threads(backend._llama)
        assert busy[0] < full[0] or full[0] == 1
        assert busy[1] < full[1]
    finally:
        backend.close()


def test_threads_the_user_chose_are_kept(two_cores: None):
    backend = _backend(2)
    try:
        with _busy_cores():
            reply(backend, ASK, SHORT)
        assert _threads(backend._llama)[0] == 2
    finally:
        backend.close()

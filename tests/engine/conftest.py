"""Fixtures of the engine tests."""

from __future__ import annotations

import pytest

from engine.gguf.backend import GgufBackend
from engine.gguf.log_bridge import LlamaLogBridge


@pytest.fixture(scope="module")
def backend():
    """A GGUF backend in the test's own process (no engine process); each test loads its model."""
    b = GgufBackend(LlamaLogBridge())
    yield b
    b.close()

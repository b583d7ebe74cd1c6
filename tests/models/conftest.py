"""Fixtures shared by the download tests: a file of random bytes, served by the fault server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fixtures.fault_server import serve_faulty


@pytest.fixture
def served_size() -> int:
    """Bytes of the served file; a module that needs another size overrides this fixture."""
    return 256 << 10


@pytest.fixture
def served(tmp_path: Path, served_size: int) -> Path:
    path = tmp_path / "served.gguf"
    path.write_bytes(os.urandom(served_size))
    return path


@pytest.fixture
def server(served: Path):
    """The fault server with `served` at /model.gguf."""
    with serve_faulty({"/model.gguf": served}) as server:
        yield server

"""Real OpenAI-compatible servers on loopback: llama-cpp-python's own, and Tailor's."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.server.config import ServerConfig
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.load_planner import LoadSettings

LLAMA_ALIAS = "smollm2"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="package")
def llama_server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m llama_cpp.server` with the starter model; yields its base URL (…/v1)."""
    port = free_port()
    log = (tmp_path_factory.mktemp("llama-server") / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(starter_model), "--model_alias", LLAMA_ALIAS,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:  # up when it answers; failed when the process exits
            assert process.poll() is None, f"llama_cpp.server exited ({process.returncode}); see {log.name}"
            assert time.monotonic() < deadline, "llama_cpp.server did not start"
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="package")
def tailor_server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    engine = OwnEngine(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    engine.load(starter_model, LoadSettings(n_ctx=2048))
    server = ServerThread(engine.client, engine.model_info, ServerConfig(port=0, api_key="tailor-key")).start()
    yield server
    server.stop()
    engine.shutdown()

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
from app.services.load_settings import LoadSettings

LLAMA_ALIAS = "smollm2"


# llama-cpp-python's server (its app and settings, as `python -m llama_cpp.server` builds them)
# served by uvicorn on a socket the test opened: argv is the socket's descriptor, the model, its alias.
LLAMA_SERVER = """
import socket, sys
import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings
fd, model, alias = int(sys.argv[1]), sys.argv[2], sys.argv[3]
app = create_app(server_settings=ServerSettings(),
                 model_settings=[ModelSettings(model=model, model_alias=alias, n_ctx=2048, verbose=False)])
uvicorn.Server(uvicorn.Config(app)).run(sockets=[socket.socket(fileno=fd)])
"""


@pytest.fixture(scope="package")
def llama_server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with the starter model; yields its base URL (…/v1).

    It listens on a socket bound here (port 0) and handed to the child, so no other process can take the
    port between choosing and listening; connections made while the model loads wait in its backlog."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    port = listener.getsockname()[1]
    log = (tmp_path_factory.mktemp("llama-server") / "server.log").open("w")
    with listener:  # the child holds the only copy once started: a child that dies refuses connections
        process = subprocess.Popen(
            [sys.executable, "-c", LLAMA_SERVER, str(listener.fileno()), str(starter_model), LLAMA_ALIAS],
            stdout=log, stderr=subprocess.STDOUT, pass_fds=[listener.fileno()],
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

"""One real engine with the starter model, and Tailor's server started on loopback over it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import openai
import pytest

from app.server.config import ServerConfig
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings

MODEL = "SmolLM2-135M-Instruct.Q4_1"
SYSTEM = {"role": "system", "content": "You are Tailor, a helpful assistant. Reply clearly and concisely."}
FRANCE = [SYSTEM, {"role": "user", "content": "What is the capital of France?"}]
STORY = [SYSTEM, {"role": "user", "content": "Write a very long story about a dragon who learns to bake bread."}]


@pytest.fixture(scope="package")
def served_engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnEngine]:
    engine = OwnEngine(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    engine.load(starter_model, LoadSettings(n_ctx=2048))
    yield engine
    engine.shutdown()


@pytest.fixture
def start_server(served_engine: OwnEngine) -> Iterator[Callable[..., ServerThread]]:
    """Start servers (port 0) over the shared engine; all stopped at teardown."""
    servers: list[ServerThread] = []

    def start(**settings: object) -> ServerThread:
        config = replace(ServerConfig(port=0), **settings)
        server = ServerThread(served_engine.client, served_engine.model_info, config).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def server(start_server: Callable[..., ServerThread]) -> ServerThread:
    return start_server()


@pytest.fixture
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


FORMAT_SETTINGS = LoadSettings(n_ctx=2048)


@contextlib.contextmanager
def format_server(model: Path, logs: Path, settings: LoadSettings = FORMAT_SETTINGS,
                  config: ServerConfig | None = None) -> Iterator[ServerThread]:
    """Tailor's server over an engine of its own with `model` (a format model: another template), loaded with
    `settings` (a projector, say), listening as `config` says (None: on a free port)."""
    engine = OwnEngine(log_path=logs / "engine.log")
    engine.load(model, settings)
    thread = ServerThread(engine.client, engine.model_info, config or ServerConfig(port=0)).start()
    try:
        yield thread
    finally:
        thread.stop()
        engine.shutdown()


def served_model(client: openai.OpenAI) -> str:
    """The id the server's one model answers to."""
    return client.models.list().data[0].id

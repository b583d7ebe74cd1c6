"""`tailor serve` over the library: any model a request names is loaded on demand, several stay loaded where
the plan says they fit together, the least recently used idle one makes room, idle ones go after their TTL.

Real engine processes (the starter model's weights under several names), a real server on loopback, the
official OpenAI client. The machine is a hypothetical one (profile_for) whose RAM holds two of these models
and not three, so the plan, not the hope, decides who is loaded.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from app.cli.main import main
from app.server.config import ServerConfig
from app.server.model_catalog import ModelCatalog
from app.server.model_pool import ModelPool, PoolSettings
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.library_models import models_on_disk
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.library import ModelStore
from models.plan.budget import RAM_RESERVE_BYTES, SAFETY_MARGIN
from models.units import GIB
from tests.fixtures.model_files import truncated_copy

SETTINGS = LoadSettings(n_ctx=512, n_parallel=2)
ASK = [{"role": "user", "content": "Say hi."}]


def names(folder: Path, starter: Path, count: int) -> list[Path]:
    """`count` models: the starter's weights under names of their own (links, so no copy is made)."""
    folder.mkdir(exist_ok=True)
    out = []
    for i in range(count):
        path = folder / f"model-{chr(97 + i)}.Q4_1.gguf"
        path.symlink_to(starter)
        out.append(path)
    return out


def one_model_bytes(path: Path) -> int:
    plan = LoadPlanner(profile_for(ram_gib=64)).plan_load(str(path), SETTINGS).plan
    return plan.forecast.devices["cpu"].total_bytes


def ram_for(models: float, each: int) -> float:
    """GiB of free RAM whose plan budget holds `models` such models (and not one more, for 2.5)."""
    return (RAM_RESERVE_BYTES + models * each / (1 - SAFETY_MARGIN)) / GIB


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., tuple[ServerThread, ModelPool]]]:
    started: list[ServerThread] = []

    def serve_(paths: list[Path], ram_gib: float, ttl_s: float = 600.0,
               queue_timeout_s: float = 120.0) -> tuple[ServerThread, ModelPool]:
        profile = profile_for(ram_gib=ram_gib)
        store = ModelStore(tmp_path / "data")
        catalog = ModelCatalog(lambda: models_on_disk(store, [str(p) for p in paths]))
        logs = iter(range(1000))
        pool = ModelPool(catalog, PoolSettings(SETTINGS, ttl_s=ttl_s, queue_timeout_s=queue_timeout_s),
                         lambda: OwnEngine(log_path=tmp_path / f"engine-{next(logs)}.log"),
                         lambda reserved: LoadPlanner(profile, status_dir=tmp_path / "status", reserved=reserved),
                         parallel=2)
        thread = ServerThread(None, None, ServerConfig(port=0), router=pool).start()
        started.append(thread)
        return thread, pool

    yield serve_
    for thread in started:
        thread.stop()


def client(server: ServerThread, timeout: float = 120) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=timeout)


def ask(server: ServerThread, model: str, timeout: float = 120) -> str:
    reply = client(server, timeout).chat.completions.create(model=model, messages=ASK, max_tokens=4, temperature=0)
    assert reply.model.lower() == model.lower(), reply.model  # answered by the model named, by its id
    return reply.choices[0].message.content or ""


def loaded(pool: ModelPool) -> set[str]:
    return {m.model.names[0] for m in pool.loaded()}


def test_models_load_on_demand_and_the_least_recently_used_idle_one_makes_room(serve, tmp_path: Path,
                                                                            starter_model: Path):
    a, b, c = names(tmp_path / "lib", starter_model, 3)
    server, pool = serve([a, b, c], ram_for(2.5, one_model_bytes(a)))
    listed = {m.id: m for m in client(server).models.list().data}
    assert set(listed) == {"model-a.Q4_1", "model-b.Q4_1", "model-c.Q4_1"} and not loaded(pool)
    ask(server, "model-a.Q4_1")
    ask(server, "model-b.Q4_1")
    assert loaded(pool) == {"model-a.Q4_1", "model-b.Q4_1"}  # both fit: both stay
    listed = {m.id: m for m in client(server).models.list().data}
    assert listed["model-a.Q4_1"].model_extra["loaded"] and not listed["model-c.Q4_1"].model_extra["loaded"]
    ask(server, "model-a.Q4_1")  # a is used again: b is now the least recently used
    ask(server, "model-c.Q4_1")
    assert loaded(pool) == {"model-a.Q4_1", "model-c.Q4_1"}
    assert [name for name, _ in pool.load_log] == ["model-a.Q4_1", "model-b.Q4_1", "model-c.Q4_1"]
    memory = sum(sum(m.memory_bytes.values()) for m in pool.loaded())
    assert memory <= 2 * one_model_bytes(a)


def test_names_that_name_no_model_are_404_and_a_deleted_file_400(serve, tmp_path: Path, starter_model: Path):
    a, b = names(tmp_path / "lib", starter_model, 2)
    server, _pool = serve([a, b], 64)
    with pytest.raises(openai.NotFoundError) as missing:
        ask(server, "no-such-model")
    assert "model-a.Q4_1" in str(missing.value) and "model-b.Q4_1" in str(missing.value)
    assert ask(server, "MODEL-A.q4_1") is not None  # names match ignoring case
    b.unlink()
    with pytest.raises(openai.BadRequestError, match="was deleted from the library"):
        ask(server, "model-b.Q4_1")
    assert [m.id for m in client(server).models.list().data] == ["model-a.Q4_1"]  # the library read again


def test_a_model_that_fails_to_load_says_why_and_the_others_keep_serving(serve, tmp_path: Path,
                                                                        starter_model: Path):
    (good,) = names(tmp_path / "lib", starter_model, 1)
    broken = truncated_copy(starter_model, tmp_path / "lib" / "broken.Q4_1.gguf", fraction=0.3)
    server, pool = serve([good, broken], 64)
    assert ask(server, "model-a.Q4_1") is not None
    with pytest.raises(openai.BadRequestError, match="could not be loaded"):
        ask(server, "broken.Q4_1")
    assert ask(server, "model-a.Q4_1") is not None and loaded(pool) == {"model-a.Q4_1"}


def test_a_model_is_idle_as_soon_as_its_reply_is_read_whole_or_streamed(serve, tmp_path: Path,
                                                                        starter_model: Path):
    # The lease goes back before the reply's last byte: no window where a finished reply still holds it.
    (a,) = names(tmp_path / "lib", starter_model, 1)
    server, pool = serve([a], 64)
    for _ in range(3):
        ask(server, "model-a.Q4_1")
        assert [m.busy for m in pool.loaded()] == [0]
        chunks = client(server).chat.completions.create(model="model-a.Q4_1", messages=ASK, max_tokens=4,
                                                        temperature=0, stream=True)
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] is not None
        assert [m.busy for m in pool.loaded()] == [0]


def test_an_idle_model_is_unloaded_after_its_ttl(serve, tmp_path: Path, starter_model: Path):
    (a,) = names(tmp_path / "lib", starter_model, 1)
    server, pool = serve([a], 64, ttl_s=1.0)
    ask(server, "model-a.Q4_1")
    (entry,) = pool.loaded()
    assert entry.busy == 0 and entry.expires_in_s is not None and entry.expires_in_s <= 1.0
    deadline = time.monotonic() + 30
    while loaded(pool) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not loaded(pool)
    assert ask(server, "model-a.Q4_1") is not None  # and it comes back on the next request
    assert [name for name, _ in pool.load_log] == ["model-a.Q4_1", "model-a.Q4_1"]


@pytest.mark.timeout(900)
def test_ten_requests_for_ten_models_at_once_are_queued_by_memory(serve, tmp_path: Path, starter_model: Path):
    # Ten engine processes start one after another (two at a time fit): on a busy 2-core machine the last
    # request waits minutes, so the client and the pool wait as long (a request is answered, not timed out).
    paths = names(tmp_path / "lib", starter_model, 10)
    each = one_model_bytes(paths[0])
    server, pool = serve(paths, ram_for(2.5, each), queue_timeout_s=800)
    most, watching = [0], threading.Event()

    def watch() -> None:  # the plan's word, sampled all along: never more than two at once
        while not watching.is_set():
            most[0] = max(most[0], len(pool.loaded()))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(10) as workers:
            answers = list(workers.map(lambda p: ask(server, p.name[: -len(".gguf")], timeout=800), paths))
    finally:
        watching.set()
        watcher.join()
    assert len(answers) == 10  # each answered
    assert most[0] <= 2 and len(pool.load_log) == 10


def test_each_reply_goes_to_the_log_with_its_model_api_tokens_and_time(serve, tmp_path: Path, starter_model: Path,
                                                                       caplog: pytest.LogCaptureFixture):
    (a,) = names(tmp_path / "lib", starter_model, 1)
    server, pool = serve([a], 64)
    with caplog.at_level("INFO", logger="app.server"):
        ask(server, "model-a.Q4_1")
        deadline = time.monotonic() + 30
        while not [r for r in caplog.records if "(chat.completions)" in r.getMessage()] and time.monotonic() < deadline:
            time.sleep(0.02)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("loaded model-a.Q4_1 in ") for line in lines), lines
    (reply,) = [line for line in lines if "(chat.completions)" in line]
    assert reply.startswith("reply ") and " of model-a.Q4_1 (chat.completions): length, " in reply
    assert " + 4 generated in " in reply and "TTFT" in reply


def test_tailor_ps_shows_what_the_server_holds_and_tailor_unload_unloads_it(serve, tmp_path: Path,
                                                                             starter_model: Path, capsys):
    a, b = names(tmp_path / "lib", starter_model, 2)
    server, pool = serve([a, b], 64, ttl_s=600)
    assert main(["ps", "--url", server.url]) == 0
    assert capsys.readouterr().out == "No model is loaded.\n"
    ask(server, "model-a.Q4_1")
    ask(server, "model-b.Q4_1")
    assert main(["ps", "--url", server.url]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "MEMORY", "WHERE", "CONTEXT", "UNLOADS"]
    assert sorted(r.split()[0] for r in rows) == ["model-a.Q4_1", "model-b.Q4_1"]
    assert all(" CPU " in r and " 512 " in r and r.rstrip().endswith("min") for r in rows), rows
    assert main(["unload", "model-a.q4_1", "--url", server.url]) == 0
    assert "Unloading model-a.q4_1" in capsys.readouterr().out
    deadline = time.monotonic() + 30
    while "model-a.Q4_1" in loaded(pool) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loaded(pool) == {"model-b.Q4_1"}
    assert main(["unload", "no-such-model", "--url", server.url]) == 1
    assert "no-such-model" in capsys.readouterr().err
    stopped = f"http://127.0.0.1:{free_port()}"
    assert main(["ps", "--url", stopped]) == 1
    assert "no server answers at" in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_listing_says_how_each_model_fits_this_machine(serve, tmp_path: Path, starter_model: Path):
    a, b = names(tmp_path / "lib", starter_model, 2)
    server, _pool = serve([a, b], ram_for(1.5, one_model_bytes(a)))
    listed = {m.id: m.model_extra for m in client(server).models.list().data}
    assert {m["fit"] for m in listed.values()} == {"CPU · fits in RAM"}
    assert all(m["context_length"] == 512 and m["loaded"] is False for m in listed.values())
    tiny = serve([a], 2.0 + 1 / 1024)  # RAM for everything else and a MiB: nothing fits
    assert client(tiny[0]).models.list().data[0].model_extra["fit"] == "too large"

"""A load's progress and its cancel: llama.cpp's own progress callback with the real starter model, in
the engine process and in-process; the PyTorch engine's per-layer progress; the thinning of reports."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from engine.backend import BackendError
from engine.client import EngineClient
from engine.gguf.backend import GgufBackend
from engine.gguf.log_bridge import LlamaLogBridge
from engine.load_watch import MIN_INTERVAL_S, MIN_STEP, LoadWatch
from engine.process_log import process_logs
from engine.protocol import (
    CancelLoadRequest,
    ChatMessage,
    Done,
    Error,
    Event,
    Loaded,
    LoadProgress,
    LoadRequest,
    SamplingParams,
)
from tests.engine.helpers import collect, reply

CAPITAL = [ChatMessage("system", DEFAULT_SYSTEM_PROMPT), ChatMessage("user", "What is the capital of France?")]
GREEDY = SamplingParams(temperature=0.0, max_tokens=48, seed=1)
DEADLINE_S = 120.0


def until_loaded(client: EngineClient) -> tuple[list[LoadProgress], Loaded | Error]:
    """The progress events of one load, and what ended it (Loaded or an Error)."""
    seen: list[LoadProgress] = []
    deadline = time.monotonic() + DEADLINE_S
    while (left := deadline - time.monotonic()) > 0:
        event = client.next_event(timeout=left)
        if isinstance(event, LoadProgress):
            seen.append(event)
        elif isinstance(event, Loaded | Error):
            return seen, event
    raise AssertionError(f"the load did not end within {DEADLINE_S}s; progress: {seen}")


@pytest.fixture
def client(tmp_path: Path):
    c = EngineClient(log_path=tmp_path / "engine.log")
    c.start()
    yield c
    c.shutdown()


def test_a_load_reports_its_progress_rising_to_the_end_then_loads(client: EngineClient, starter_model: Path):
    client.load(LoadRequest(str(starter_model), n_ctx=512))
    seen, end = until_loaded(client)
    assert isinstance(end, Loaded), end
    fractions = [p.fraction for p in seen]
    assert fractions[0] == 0.0 and fractions == sorted(fractions) and len(set(fractions)) >= 10
    assert [p.stage for p in seen[-2:]] == ["reading", "context"] and fractions[-2:] == [1.0, 1.0]
    assert {p.stage for p in seen} == {"reading", "context"}  # no GPU layers: nothing offloaded
    # llama.cpp calls back once per tensor (272 here); the client hears steps of 2 % (or 100 ms) at most.
    assert len(seen) <= 1 / MIN_STEP + 5


def test_a_cancelled_load_stops_inside_llama_cpp_and_the_engine_loads_and_chats_after(
    client: EngineClient, starter_model: Path, tmp_path: Path
):
    client.load(LoadRequest(str(starter_model), n_ctx=512))
    client.cancel_load()  # reaches the engine's reader while the load runs: its next report stops it
    seen, end = until_loaded(client)
    assert isinstance(end, Error) and end.kind == "load_cancelled", end
    assert end.message == f"Loading {starter_model.name} was cancelled." and end.request_id is None
    assert all(p.fraction < 1.0 for p in seen)  # it stopped before the weights were in
    log = "".join(f.read_text(errors="replace") for f in process_logs(tmp_path / "engine.log"))
    assert "cancelled model load" in log  # llama.cpp's own word: its callback said stop, it freed what it read
    client.load(LoadRequest(str(starter_model), n_ctx=512))  # a later load is not touched by that cancel
    seen, end = until_loaded(client)
    assert isinstance(end, Loaded) and seen[-1] == LoadProgress(1.0, "context")
    answer = collect(client, client.generate(CAPITAL, GREEDY)).end
    assert isinstance(answer, Done) and "Paris" in answer.text


def test_a_cancel_with_no_load_running_cancels_no_later_load(client: EngineClient, starter_model: Path):
    client.cancel_load()
    client.load(LoadRequest(str(starter_model), n_ctx=512))
    _seen, end = until_loaded(client)
    assert isinstance(end, Loaded), end


def test_a_backend_told_to_stop_halfway_stops_there_and_loads_again(starter_model: Path):
    heard: list[tuple[float, str]] = []
    stop_at = [0.5]

    def progress(fraction: float, stage: str) -> bool:
        heard.append((fraction, stage))
        return fraction < stop_at[0]

    backend = GgufBackend(LlamaLogBridge(), progress)
    try:
        with pytest.raises(BackendError) as raised:
            backend.load(LoadRequest(str(starter_model), n_ctx=512, n_gpu_layers=-1))
        assert raised.value.kind == "load_cancelled"
        # Stopped at the first report past half, with no try at fewer GPU layers (no report from 0 again).
        fractions = [f for f, _ in heard]
        assert fractions == sorted(fractions) and 0.5 <= fractions[-1] < 1.0
        heard.clear()
        stop_at[0] = 2.0
        backend.load(LoadRequest(str(starter_model), n_ctx=512))
        assert heard[-2:] == [(1.0, "reading"), (1.0, "context")]
        assert "Paris" in reply(backend, CAPITAL, GREEDY).text
    finally:
        backend.close()


def test_the_pytorch_engine_reports_each_layer_and_stops_when_told(tmp_path: Path):
    pytest.importorskip("torch")
    from engine.torch.backend import TorchBackend
    from tests.fixtures.tiny_hf import write_tiny_model

    write_tiny_model(tmp_path, "qwen2")
    heard: list[tuple[float, str]] = []
    go_on = [lambda n: n < 2]  # stop at the second layer

    def progress(fraction: float, stage: str) -> bool:
        heard.append((fraction, stage))
        return go_on[0](len(heard))

    backend = TorchBackend(device="cpu", progress=progress)
    with pytest.raises(BackendError) as raised:
        backend.load(LoadRequest(str(tmp_path), n_ctx=128))
    assert raised.value.kind == "load_cancelled" and len(heard) == 2
    heard.clear()
    go_on[0] = lambda n: True
    backend.load(LoadRequest(str(tmp_path), n_ctx=128))
    fractions = [f for f, _ in heard]
    assert fractions[0] == 0.0 and fractions == sorted(fractions) and len(fractions) >= 3
    assert heard[-2:] == [(1.0, "reading"), (1.0, "context")]
    backend.close()


# ---------------------------------------------------------------- the thinning and the counting


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reports_are_thinned_to_steps_of_two_percent_or_a_tenth_of_a_second():
    sent: list[Event] = []
    clock = _Clock()
    watch = LoadWatch(sent.append, clock)
    watch.heard(LoadRequest("a.gguf"))
    watch.begin()
    for i in range(1, 1001):  # a thousand calls a millisecond apart: llama.cpp on a big file
        clock.now += 0.001
        assert watch.report(i / 1000 * 0.5, "offloading")
    fractions = [e.fraction for e in sent]
    assert sent[0] == LoadProgress(0.0, "reading") and sent[1].stage == "offloading"
    assert all(b - a >= MIN_STEP - 1e-9 for a, b in zip(fractions[2:], fractions[3:], strict=False))
    assert len(sent) <= 2 + 0.5 / MIN_STEP
    before = len(sent)
    clock.now += MIN_INTERVAL_S  # slow progress is still heard every 100 ms
    watch.report(0.501, "offloading")
    assert len(sent) == before + 1
    watch.report(1.0, "offloading")
    watch.report(1.0, "offloading")  # the end once
    watch.report(0.2, "offloading")  # a try with fewer GPU layers: from the start again
    assert [(e.fraction, e.stage) for e in sent[-2:]] == [(1.0, "offloading"), (0.2, "offloading")]


def test_a_cancel_stops_the_loads_taken_before_it_and_none_after():
    sent: list[Event] = []
    watch = LoadWatch(sent.append)
    assert not watch.heard(LoadRequest("a.gguf")) and not watch.heard(LoadRequest("b.gguf"))
    assert watch.heard(CancelLoadRequest())  # the reader is done with it
    watch.heard(LoadRequest("c.gguf"))
    outcomes = []
    for _ in range(3):
        watch.begin()
        outcomes.append(watch.report(0.5, "reading"))
    assert outcomes == [False, False, True]  # a and b (one running, one queued) stopped; c loads


def test_a_cancel_after_the_last_report_closes_what_was_loaded_and_fails_the_load():
    watch = LoadWatch(lambda _e: None)
    watch.heard(LoadRequest("/models/x.gguf"))
    watch.begin()
    closed: list[bool] = []
    watch.check("/models/x.gguf", lambda: closed.append(True))  # not cancelled: nothing to do
    assert closed == []
    watch.heard(CancelLoadRequest())
    with pytest.raises(BackendError, match=r"Loading x\.gguf was cancelled\.") as raised:
        watch.check("/models/x.gguf", lambda: closed.append(True))
    assert raised.value.kind == "load_cancelled" and closed == [True]

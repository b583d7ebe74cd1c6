"""The engine child process with the real starter model and real llama.cpp."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from engine.client import EngineClient
from engine.process_log import latest_process_log
from engine.protocol import ChatMessage, Done, Error, Loaded, LoadRequest, MemoryReport, SamplingParams, Token
from tests.engine.helpers import collect, load, wait_for
from tests.fixtures.model_files import copy_with_chat_template

GREEDY = SamplingParams(temperature=0.0, max_tokens=48, seed=1)
# The client notices its child's death at once (it waits on the process as well as the pipe,
# waking every 0.25 s): the bound is the siblings' 10 s, room for a loaded 2-core machine, and
# far below the 60 s the helpers wait for an event, after which an unnoticed death would show.
DEATH_NOTICED_S = 10.0
FRANCE = [ChatMessage("system", DEFAULT_SYSTEM_PROMPT), ChatMessage("user", "What is the capital of France?")]


@pytest.fixture(scope="module")
def engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """One engine with the starter model loaded, shared by the well-behaved tests."""
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.start()
    loaded = load(client, str(starter_model))
    assert isinstance(loaded, Loaded), loaded
    yield client
    client.shutdown()


@pytest.fixture
def fresh_engine(tmp_path: Path):
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    yield client
    client.shutdown()


def test_answers_paris_and_streams_the_same_text_it_reports(engine: EngineClient):
    reply = collect(engine, engine.generate(FRANCE, GREEDY))
    assert isinstance(reply.end, Done), reply.end
    assert "Paris" in reply.text
    assert reply.end.text == reply.text
    assert reply.end.finish_reason in ("stop", "length")
    stats = reply.end.stats
    # Token events carry one or more tokens each (the host coalesces them).
    assert stats.prompt_tokens > 10 and stats.gen_tokens >= len(reply.tokens) >= 1
    assert stats.ttft_s > 0 and stats.prefill_tok_s > 0 and stats.decode_tok_s > 0


def test_second_turn_prefills_only_the_new_tokens(engine: EngineClient):
    first = collect(engine, engine.generate(FRANCE, GREEDY)).end
    assert isinstance(first, Done)
    turn2 = [*FRANCE, ChatMessage("assistant", first.text), ChatMessage("user", "And of Italy?")]
    second = collect(engine, engine.generate(turn2, GREEDY)).end
    assert isinstance(second, Done)
    # The whole first prompt is reused, plus most of the reply as the template re-renders it.
    assert second.stats.cached_tokens >= first.stats.prompt_tokens
    assert second.stats.prompt_tokens - second.stats.cached_tokens < 40
    assert "Rome" in second.text


def test_stop_string_ends_the_reply_before_it(engine: EngineClient):
    sampling = SamplingParams(temperature=0.0, max_tokens=48, stop=("Paris",))
    reply = collect(engine, engine.generate(FRANCE, sampling))
    assert isinstance(reply.end, Done)
    assert reply.end.finish_reason == "stop"
    assert "Paris" not in reply.text


def test_max_tokens_ends_with_length(engine: EngineClient):
    sampling = SamplingParams(temperature=0.0, max_tokens=5)
    reply = collect(engine, engine.generate([ChatMessage("user", "Write a long poem about the sea.")], sampling))
    assert isinstance(reply.end, Done)
    assert reply.end.finish_reason == "length"
    assert reply.end.stats.gen_tokens == 5


def test_cancel_mid_stream_stops_promptly(engine: EngineClient):
    prompt = [ChatMessage("user", "Tell me a very long story about a dragon.")]
    rid = engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=1000))
    seen = 0
    while seen < 5:
        event = wait_for(engine, (Token,))
        seen += isinstance(event, Token)
    t0 = time.monotonic()
    engine.cancel(rid)
    reply = collect(engine, rid)
    assert isinstance(reply.end, Done)
    assert reply.end.finish_reason == "cancelled"
    # The engine checks for a cancel before every token: only the few tokens already in
    # flight come after it, however busy the machine is. The 200 ms bound of the issue is
    # a timing, measured in tests/bench/bench_cancel_latency.py; here only "no hang".
    assert reply.end.stats.gen_tokens < 100
    assert time.monotonic() - t0 < 30


def test_memory_report_states_llama_cpp_buffers(engine: EngineClient):
    reply = collect(engine, engine.generate(FRANCE, GREEDY))
    assert reply.memory, "a memory report follows every reply"
    report = reply.memory[-1]
    assert isinstance(report, MemoryReport)
    cpu = report.devices[0]
    assert cpu.device == "cpu"
    assert 60e6 < cpu.weights_bytes < 120e6  # the Q4_1 file is 98 MB
    assert cpu.kv_allocated_bytes > 0 and cpu.compute_bytes > 0
    assert 0 < report.kv_tokens_used <= report.kv_tokens_total == 2048


def test_context_overflow_is_a_clear_error(engine: EngineClient):
    long_prompt = [ChatMessage("user", "word " * 3000)]
    reply = collect(engine, engine.generate(long_prompt, GREEDY))
    assert isinstance(reply.end, Error) and reply.end.kind == "context_overflow"
    # The engine keeps working.
    assert isinstance(collect(engine, engine.generate(FRANCE, GREEDY)).end, Done)


def test_llama_cpp_log_goes_to_the_log_file(starter_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture):
    log_path = tmp_path / "engine.log"
    client = EngineClient(log_path=log_path)
    client.start()
    try:
        assert isinstance(load(client, str(starter_model)), Loaded)
    finally:
        client.shutdown()
    text = latest_process_log(log_path).read_text()
    assert "llama_model_loader" in text or "print_info" in text
    captured = capfd.readouterr()
    assert "llama_model_loader" not in captured.err and "print_info" not in captured.err


def test_generate_without_a_model_is_no_model(fresh_engine: EngineClient):
    reply = collect(fresh_engine, fresh_engine.generate(FRANCE, GREEDY))
    assert isinstance(reply.end, Error) and reply.end.kind == "no_model"


@pytest.mark.parametrize("which", ["missing", "not_a_model", "truncated"])
def test_bad_model_file_is_invalid_model_and_engine_survives(
    which: str, fresh_engine: EngineClient, starter_model: Path, not_a_model: Path, truncated_model: Path, tmp_path: Path
):
    path = {"missing": tmp_path / "nope.gguf", "not_a_model": not_a_model, "truncated": truncated_model}[which]
    result = load(fresh_engine, str(path))
    assert isinstance(result, Error), result
    assert result.kind == "invalid_model"
    assert path.name in result.message
    # Same engine process, still able to load and answer.
    assert fresh_engine.running
    assert isinstance(load(fresh_engine, str(starter_model)), Loaded)
    assert isinstance(collect(fresh_engine, fresh_engine.generate(FRANCE, GREEDY)).end, Done)


def test_sigkill_while_streaming_reports_engine_died_and_restart_works(
    fresh_engine: EngineClient, starter_model: Path
):
    assert isinstance(load(fresh_engine, str(starter_model)), Loaded)
    rid = fresh_engine.generate([ChatMessage("user", "Tell me a long story.")], SamplingParams(max_tokens=500))
    assert isinstance(wait_for(fresh_engine, (Token,)), Token)
    os.kill(fresh_engine.pid, signal.SIGKILL)
    # Tokens sent before the kill may still come (skipped); the first error must be the death,
    # reported by the client itself within the bound (wait_for fails the test otherwise).
    died = wait_for(fresh_engine, (), timeout=DEATH_NOTICED_S)
    assert isinstance(died, Error) and died.kind == "engine_died"
    assert "SIGKILL" in died.message
    assert not fresh_engine.running
    fresh_engine.restart()
    assert isinstance(load(fresh_engine, str(starter_model)), Loaded)
    reply = collect(fresh_engine, fresh_engine.generate(FRANCE, GREEDY))
    assert isinstance(reply.end, Done) and "Paris" in reply.text
    del rid


HOSTILE_TEMPLATES = {
    "subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "os_system": "{{ cycler.__init__.__globals__.os.system('touch MARKER') }}",
    "endless": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "huge": "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TEMPLATES))
def test_hostile_chat_template_in_the_model_file_is_a_template_error(
    name: str, fresh_engine: EngineClient, starter_model: Path, tmp_path: Path
):
    marker = tmp_path / "escaped"
    template = HOSTILE_TEMPLATES[name].replace("MARKER", str(marker))
    model = copy_with_chat_template(starter_model, tmp_path / f"hostile-{name}.gguf", template)
    assert isinstance(load(fresh_engine, str(model)), Loaded)
    engine = psutil.Process(fresh_engine.pid)
    cpu0 = sum(engine.cpu_times()[:2])
    reply = collect(fresh_engine, fresh_engine.generate(FRANCE, GREEDY))
    assert isinstance(reply.end, Error), reply.end
    assert reply.end.kind == "template"
    # Stopped by its limits (2 s of rendering, the output's size, the memory it grows): counted in the engine's
    # own CPU time, which other programs on a busy machine do not stretch as they do the wall clock.
    assert sum(engine.cpu_times()[:2]) - cpu0 < 10
    assert not marker.exists()
    assert fresh_engine.running


def test_q8_0_kv_cache_is_what_the_forecast_says(fresh_engine: EngineClient, starter_model: Path):
    fresh_engine.load(LoadRequest(str(starter_model), n_ctx=2048, kv_type="q8_0", flash_attn=True))
    assert isinstance(wait_for(fresh_engine, (Loaded,)), Loaded)
    report = wait_for(fresh_engine, (MemoryReport,))
    # 30 layers x 2048 cells x 192 values x (K + V), 34 bytes per 32 values; llama.cpp
    # logs the size in MiB with two decimals.
    expected = 30 * 2048 * 192 * 2 * 34 // 32
    assert abs(report.devices[0].kv_allocated_bytes - expected) <= 0.005 * 2**20


@pytest.mark.parametrize(("kv", "fa"), [("q3_k", True), ("q4_0", False)])
def test_kv_settings_the_engine_cannot_honour_are_bad_request(
    kv: str, fa: bool, fresh_engine: EngineClient, starter_model: Path
):
    fresh_engine.load(LoadRequest(str(starter_model), n_ctx=2048, kv_type=kv, flash_attn=fa))
    result = wait_for(fresh_engine, (Loaded,))
    assert isinstance(result, Error) and result.kind == "bad_request"
    assert kv in result.message


def test_shutdown_lets_a_loaded_engine_exit_on_its_own(starter_model: Path, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture):
    # The client's reader thread and shutdown both wait for the process: whichever reaps it, shutdown sees
    # it gone rather than killing a process that had left (and warning that it hung). `tailor serve` over
    # the library hit this on every stop; here it is a race that shows on some runs only.
    for i in range(3):
        client = EngineClient(log_path=tmp_path / f"engine-{i}.log")
        client.start()
        assert isinstance(load(client, str(starter_model)), Loaded)
        assert isinstance(collect(client, client.generate(FRANCE, GREEDY)).end, Done)
        process = client._process
        assert process is not None
        client.shutdown()
        assert process.exitcode == 0, process.exitcode
    assert "killing it" not in caplog.text

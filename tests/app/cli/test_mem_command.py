"""`tailor chat --json --mem` and `tailor mem`, run as a user runs them (the console script)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from app.cli.mem import DEVICE_KEYS, NO_ENGINE, format_status, memory_json
from app.services.load_settings import LoadSettings
from app.services.paths import AppPaths
from app.services.planning.load_planner import LoadPlanner
from engine.client import EngineClient
from engine.protocol import ChatMessage, DeviceMemory, Loaded, MemoryReport, SamplingParams
from models.hardware.profile import profile_for
from tests.app.cli.test_chat_command import tailor
from tests.engine.helpers import collect, wait_for

ISSUE_KEYS = {"device", "weights_bytes", "kv_allocated_bytes", "kv_used_bytes", "kv_used_tokens", "compute_bytes",
              "prefix_cache_bytes", "other_bytes", "free_bytes", "total_bytes"}


def test_chat_json_mem_prints_the_memory_report_after_the_stats(tmp_path: Path):
    result = tailor("chat", "--json", "--mem", "--temperature", "0", "--max-tokens", "12", "--ctx", "2048",
                    "Capital of France?", home=tmp_path)
    assert result.returncode == 0, result.stderr
    *_reply, stats_line, mem_line = result.stdout.rstrip("\n").split("\n")
    stats, mem = json.loads(stats_line), json.loads(mem_line)
    # The command plans for the machine it runs on: the host first, then any GPU the plan used.
    devices = mem["devices"]
    assert devices[0]["device"] == "cpu" and all(d["device"].startswith("cuda:") for d in devices[1:])
    for device in devices:
        assert set(device) >= ISSUE_KEYS and list(device) == list(DEVICE_KEYS)
    holding_kv = [d for d in devices if d["kv_allocated_bytes"]]
    # The report is taken at the end of the reply: its cells hold the prompt and the reply.
    for device in holding_kv:
        assert stats["prompt_tokens"] + stats["gen_tokens"] - 1 <= device["kv_used_tokens"]
        assert device["kv_used_tokens"] <= stats["prompt_tokens"] + stats["gen_tokens"]
    assert sum(d["kv_allocated_bytes"] for d in devices) == 30 * 2048 * 192 * 2 * 2
    forecast = mem["forecast"]
    for device in holding_kv:
        assert forecast["devices"][device["device"]]["kv_cache_bytes"] == device["kv_allocated_bytes"]
    weights = sum(d["weights_bytes"] for d in devices)
    assert abs(forecast["weights_bytes"] - weights) <= 0.05 * weights
    assert not list((tmp_path / "cache" / "engines").glob("*.json"))  # the engine took its file with it


def test_mem_without_json_is_a_clear_error(tmp_path: Path):
    result = tailor("chat", "--mem", "hi", home=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == "tailor: error: --mem adds a line to --json's output: use both"


def test_mem_says_plainly_when_no_engine_runs(_tailor_home: Path):
    engines = AppPaths.default().engine_status
    engines.mkdir(parents=True)
    # Left behind by an engine that was killed: a process id that is not running.
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = engines / f"engine-{dead.pid}.json"
    stale.write_text(json.dumps({"pid": dead.pid, "started": 1.0, "memory": MemoryReport((), 0, 0).to_dict()}))
    (engines / "engine-1.json").write_text("{not json")
    result = tailor("mem", home=_tailor_home)
    assert result.returncode == 1
    assert result.stdout.strip() == NO_ENGINE
    assert result.stderr == ""
    assert not stale.exists()


@pytest.fixture
def running_engine(starter_model: Path, tmp_path: Path):
    """An engine loaded the way every front end loads one (through LoadPlanner), planned for a
    machine without GPU whatever this one has."""
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    client.load(LoadPlanner(profile_for(ram_gib=16)).plan_load(str(starter_model), LoadSettings(n_ctx=2048)).request)
    assert isinstance(wait_for(client, (Loaded,)), Loaded)
    collect(client, client.generate([ChatMessage("user", "Hi")], SamplingParams(temperature=0.0, max_tokens=4)))
    wait_for(client, (MemoryReport,))
    yield client
    client.shutdown()


def test_mem_shows_a_running_engine(running_engine: EngineClient, _tailor_home: Path):
    result = tailor("mem", "--json", home=_tailor_home)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.strip().splitlines()
    status = json.loads(line)
    assert status["pid"] == running_engine.pid
    assert status["model"]["n_ctx"] == 2048
    cpu = next(d for d in status["devices"] if d["device"] == "cpu")
    assert set(cpu) >= ISSUE_KEYS and cpu["kv_used_tokens"] > 0
    assert status["forecast"]["devices"]["cpu"]["kv_cache_bytes"] == cpu["kv_allocated_bytes"]
    text = tailor("mem", home=_tailor_home)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"Engine {running_engine.pid}: ") and "context 2,048" in lines[0]
    assert any(line.startswith("RAM (cpu): ") for line in lines)
    assert any(line.strip().startswith("weights") and "forecast" in line for line in lines)
    assert any(line.startswith("KV cache: ") and "/ 2,048 tokens in use" in line for line in lines)


def _report(shared_tokens: int, shared_bytes: int) -> MemoryReport:
    cpu = DeviceMemory("cpu", 10**8, 4 * 10**6, 10**6, 10**5, 10**7, 10**9, 16 * 10**9, 512, 2048)
    return MemoryReport((cpu,), kv_tokens_used=512, kv_tokens_total=2048,
                        kv_shared_tokens=shared_tokens, kv_shared_bytes=shared_bytes)


def test_mem_reports_kv_blocks_shared_by_several_sequences():
    # The PyTorch engine's prefix caching: 256 tokens of a system prompt read by several chats.
    report = _report(256, 2_500_000)
    line = memory_json(report, None)
    assert line["kv_shared_tokens"] == 256 and line["kv_shared_bytes"] == 2_500_000
    text = format_status({"pid": 7, "memory": report.to_dict()})
    assert "Shared prefixes: 256 tokens (2.5 MB) stored once" in text.splitlines()
    # The status file a running engine writes keeps them (to_dict / from_dict).
    assert memory_json(MemoryReport.from_dict(report.to_dict()), None) == line


def test_mem_leaves_out_the_shared_line_when_nothing_is_shared():
    report = _report(0, 0)
    assert memory_json(report, None)["kv_shared_tokens"] == 0
    text = format_status({"pid": 7, "memory": report.to_dict()})
    assert "Shared prefixes" not in text and "Kept for reuse" not in text


def test_mem_reports_prefixes_kept_for_reuse():
    # The PyTorch engine after a reply: its prompt's blocks are free but still hold the prefix.
    report = replace(_report(0, 0), kv_tokens_used=0, kv_cached_tokens=320)
    assert memory_json(report, None)["kv_cached_tokens"] == 320
    text = format_status({"pid": 7, "memory": report.to_dict()})
    assert "Kept for reuse: 320 tokens of finished replies' prefixes, in free KV blocks" in text.splitlines()


def test_mem_names_the_conversations_sharing_the_kv_cache():
    # Three replies running at once on a GGUF model loaded for 4 (tailor serve --parallel 4)
    report = replace(_report(0, 0), kv_sequence_tokens=(300, 120, 92), parallel=4)
    text = format_status({"pid": 7, "memory": report.to_dict()})
    assert ("KV cache: 512 / 2,048 tokens in use by 3 conversations (300 + 120 + 92); up to 4 at once; "
            "room for 1,536 more tokens of context") in text.splitlines()
    alone = replace(report, kv_sequence_tokens=(512,))
    assert "tokens in use; shared by up to 4 replies at once; room" in format_status(
        {"pid": 7, "memory": alone.to_dict()})
    one_slot = replace(report, parallel=1)  # a sliding-window model: nothing to say
    assert "tokens in use; room for" in format_status({"pid": 7, "memory": one_slot.to_dict()})

"""`tailor search` against the fake hub (the parser is wired in app/cli/main.py; run here directly)."""

from __future__ import annotations

import argparse
import json

import pytest

from app.cli.search import add_search_parser
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures.fake_hub import FakeHub

fake_hub = hub_fixtures.fake_hub


def search(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="tailor")
    add_search_parser(parser.add_subparsers())
    args = parser.parse_args(["search", *argv])
    return args.func(args)


def _repos(hub: FakeHub) -> None:
    hub.add_repo("org/Llama-GGUF", {"m-Q4_K_M.gguf": b"GGUF"}, tags=["gguf", "llama", "en"], downloads=1234,
                 last_modified="2025-02-03T04:05:06.000Z")
    hub.add_repo("org/Llama-AWQ", {"config.json": b"{}"}, tags=["awq", "safetensors"], downloads=99, gated="auto")
    hub.add_repo("org/Mistral-GGUF", {"m.gguf": b"GGUF"}, tags=["gguf"], downloads=5)


def test_human_output_one_line_per_repo(fake_hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    _repos(fake_hub)
    assert search("llama") == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("org/Llama-GGUF") and "1,234 downloads" in lines[0] and "2025-02-03" in lines[0]
    assert lines[0].endswith("gguf") and " en" not in lines[0]
    assert lines[1].startswith("org/Llama-AWQ") and "awq" in lines[1] and "gated" in lines[1]


def test_json_and_filters(fake_hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    _repos(fake_hub)
    assert search("", "--gguf", "--json") == 0
    repos = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in repos] == ["org/Llama-GGUF", "org/Mistral-GGUF"]
    assert repos[0]["downloads"] == 1234 and repos[0]["last_modified"].startswith("2025-02-03")
    assert search("llama", "--awq", "--json") == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["org/Llama-AWQ"]
    fake_hub.add_repo("org/Llama-GPTQ", {"config.json": b"{}"}, tags=["gptq", "4-bit"], downloads=7)
    fake_hub.add_repo("org/Qwen-FP8", {"config.json": b"{}"}, tags=["fp8", "compressed-tensors"], downloads=3)
    assert search("", "--gptq", "--json") == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["org/Llama-GPTQ"]
    assert search("", "--fp8", "--json") == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["org/Qwen-FP8"]
    assert search("nothing", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []


def test_offline_is_one_line_on_stderr(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert search("llama") == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("tailor: error: ") and out.err.count("\n") == 1
    assert "offline" in out.err


def test_unreachable_hub(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    fake_hub.stop()
    assert search("llama", "--json") == 1
    assert "cannot reach the hub" in capsys.readouterr().err

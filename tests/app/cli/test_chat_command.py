"""The `tailor` command, run as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.process_log import latest_process_log

TAILOR = str(Path(sys.executable).with_name("tailor"))


def tailor(*args: str, home: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAILOR_HOME": str(home)}
    return subprocess.run([TAILOR, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_chat_answers_paris_with_the_built_in_model(tmp_path: Path):
    result = tailor("chat", "--temperature", "0", "What is the capital of France?", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout
    # llama.cpp's own log goes to the log file, not the terminal: stderr has only the startup line.
    (line,) = result.stderr.splitlines()
    assert line.startswith("tailor: loaded ") and " tokens of context (auto: " in line
    assert "llama" in latest_process_log(tmp_path / "logs" / "engine.log").read_text()


def test_json_prints_reply_then_one_line_of_stats(tmp_path: Path):
    result = tailor(
        "chat", "--json", "--temperature", "0", "--max-tokens", "24", "--system", "Answer in one word.",
        "Capital of France?", home=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    *reply, last = result.stdout.rstrip("\n").split("\n")
    stats = json.loads(last)
    assert set(stats) == {"ttft_s", "prompt_tokens", "cached_tokens", "gen_tokens", "prefill_tok_s", "decode_tok_s",
                          "reasoning_tokens"}
    assert stats["prompt_tokens"] > 5 and 0 < stats["gen_tokens"] <= 24
    assert stats["ttft_s"] > 0 and stats["decode_tok_s"] >= 0
    assert "".join(reply).strip()


@pytest.mark.parametrize("which", ["missing", "not_a_model", "truncated"])
def test_bad_model_is_one_line_on_stderr_and_nonzero_exit(
    which: str, tmp_path: Path, not_a_model: Path, truncated_model: Path
):
    path = {"missing": tmp_path / "nope.gguf", "not_a_model": not_a_model, "truncated": truncated_model}[which]
    result = tailor("chat", "--model", str(path), "hello", home=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tailor: error: ") and path.name in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_bad_option_is_a_usage_error(tmp_path: Path):
    result = tailor("chat", "--ctx", "0", "hi", home=tmp_path)
    assert result.returncode == 2
    assert "positive integer" in result.stderr


def test_version(tmp_path: Path):
    result = tailor("--version", home=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("tailor 0.")


def test_kv_and_flash_attention_options(tmp_path: Path):
    result = tailor(
        "chat", "--kv", "q8_0", "--flash-attn", "off", "--temperature", "0", "--max-tokens", "8", "--json", "Hi",
        home=tmp_path,
    )
    # q8_0 needs flash attention: the planner turns it on instead of failing.
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["gen_tokens"] >= 1
    bad = tailor("chat", "--flash-attn", "maybe", "Hi", home=tmp_path)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_a_second_run_reuses_the_system_prompt_from_the_disk_cache(tmp_path: Path):
    system = "You are a careful assistant. " * 40  # a long system prompt, worth keeping warm
    args = ("chat", "--json", "--temperature", "0", "--max-tokens", "4", "--system", system)
    first = tailor(*args, "Hi", home=tmp_path)
    second = tailor(*args, "Hello there", home=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    cold = json.loads(first.stdout.strip().splitlines()[-1])
    warm = json.loads(second.stdout.strip().splitlines()[-1])
    assert cold["cached_tokens"] == 0
    assert warm["cached_tokens"] >= 200  # the shared system prompt came from the previous process
    assert list((tmp_path / "cache" / "prefix-cache").iterdir())


def test_presets_add_list_use_and_remove(tmp_path: Path):
    long_prompt = "You are a patient tutor of geography for children. " * 12
    added = tailor("presets", "add", "tutor", "--system", long_prompt, "--temperature", "0", "--pin", home=tmp_path)
    assert added.returncode == 0 and "Saved preset tutor (pinned)" in added.stdout, added.stderr
    listed = json.loads(tailor("presets", "--json", home=tmp_path).stdout)
    tutor = next(p for p in listed["presets"] if p["name"] == "tutor")
    assert tutor == {
        "name": "tutor", "system_prompt": long_prompt, "temperature": 0.0, "top_p": 0.95,
        "max_tokens": 512, "pinned": True,
    }
    assert any(p["name"] == "Tailor" and p["pinned"] for p in listed["presets"])  # the built-in one
    plain = tailor("chat", "--json", "--max-tokens", "4", "Capital of France?", home=tmp_path)
    with_preset = tailor("chat", "--json", "--max-tokens", "4", "--preset", "tutor", "Capital of France?", home=tmp_path)
    assert with_preset.returncode == 0, with_preset.stderr
    tokens = [json.loads(r.stdout.strip().splitlines()[-1])["prompt_tokens"] for r in (plain, with_preset)]
    assert tokens[1] > tokens[0] + 100  # the preset's long system prompt was sent
    assert tailor("presets", "rm", "tutor", home=tmp_path).returncode == 0
    missing = tailor("chat", "--preset", "tutor", "Hi", home=tmp_path)
    assert missing.returncode == 1 and missing.stderr.strip() == (
        "tailor: error: No preset named 'tutor' (see `tailor presets`)."
    )
    gone = tailor("presets", "rm", "tutor", home=tmp_path)
    assert gone.returncode == 1 and "No preset named 'tutor'" in gone.stderr

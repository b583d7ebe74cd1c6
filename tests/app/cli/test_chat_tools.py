"""`tailor chat --mcp`: the real model (the starter's weights under Qwen3's template, which takes tools) calls a
real MCP server's tool through the installed command; permissions by flag, and denied without a terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.app.cli.test_chat_command import tailor
from tests.paths import FIXTURES

ECHO = FIXTURES / "mcp_servers" / "echo_server.py"
GREEDY = ("--temperature", "0", "--max-tokens", "48", "--reasoning", "off")


@pytest.fixture(scope="module")
def qwen3(format_models: Callable[[str], Path]) -> Path:
    return format_models("qwen3")


def _home(tmp_path: Path) -> Path:
    config = tmp_path / "config"
    config.mkdir()
    servers = {"echo": {"command": sys.executable, "args": [str(ECHO)]}}
    (config / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return tmp_path


def test_a_required_call_runs_on_the_server_and_the_reply_goes_on(tmp_path: Path, qwen3: Path):
    home = _home(tmp_path)
    result = tailor("chat", "--model", str(qwen3), *GREEDY, "--mcp", "echo", "--allow", "echo", "--tool-choice", "echo",
                    "--tool-steps", "2", "Echo the word hello.", home=home)
    assert result.returncode == 0, result.stderr
    called = [line for line in result.stderr.splitlines() if line.startswith("tailor: called ")]
    assert called and called[0].startswith("tailor: called echo (echo) · ok · "), result.stderr
    assert "Traceback" not in result.stderr


def test_without_a_terminal_a_call_not_allowed_is_denied_and_said(tmp_path: Path, qwen3: Path):
    home = _home(tmp_path)
    result = tailor("chat", "--model", str(qwen3), *GREEDY, "--mcp", "echo", "--tool-choice", "echo",
                    "--tool-steps", "1", "Echo the word hello.", home=home)
    assert result.returncode == 0, result.stderr
    assert "tailor: called echo (echo) · denied" in result.stderr
    assert "denied echo: there is no terminal to ask; allow it with --allow echo or --allow-all" in result.stderr


@pytest.mark.parametrize("options, says", [
    (("--mcp", "nope"), "no MCP server named nope"),
    (("--allow", "echo"), "--allow, --allow-all and --tool-choice are for the tools of --mcp servers"),
    (("--mcp", "echo", "--tool-steps", "0"), "--tool-steps must be 1 or more"),
])
def test_wrong_tool_options_are_one_line(tmp_path: Path, qwen3: Path, options: tuple[str, ...], says: str):
    result = tailor("chat", "--model", str(qwen3), *GREEDY, *options, "hello", home=_home(tmp_path))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("tailor: error: ")]
    assert len(errors) == 1 and says in errors[0], result.stderr


def test_a_model_whose_template_takes_no_tools_is_refused(tmp_path: Path):
    result = tailor("chat", *GREEDY, "--mcp", "echo", "hello", home=_home(tmp_path))
    assert result.returncode == 1
    assert "chat template takes no tools" in result.stderr

"""`tailor mcp ls|add|rm|test|import` through the installed console script, as a user runs it, with the
configuration under TAILOR_HOME and no system keyring (the secrets go to the 0600 file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.app.cli.test_chat_command import TAILOR
from tests.fixtures.mcp_servers import BAD, ECHO


def tailor(*args: str, home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAILOR_HOME": str(home), "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    return subprocess.run([TAILOR, "mcp", *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_add_list_test_and_remove_a_server(tmp_path: Path):
    home = tmp_path / "home"
    added = tailor("add", "echo", "--env", "API_KEY=k-789", "--", sys.executable, str(ECHO), home=home)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"Added echo: stdio: {sys.executable} {ECHO} (env: API_KEY); secrets in ")
    config = home / "config" / "mcp.json"
    assert "k-789" not in config.read_text() and "k-789" in (home / "config" / "mcp-secrets.json").read_text()
    listed = tailor("ls", home=home)
    assert listed.stdout == f"echo  enabled   stdio: {sys.executable} {ECHO} (env: API_KEY)\n"
    tested = tailor("test", "echo", home=home)
    assert tested.returncode == 0, tested.stderr
    first, *tools = tested.stdout.splitlines()
    assert first.startswith("echo: ready in ") and first.endswith(" s, 8 tool(s)")
    assert tools[0] == "  echo: Return the text unchanged." and len(tools) == 8
    assert tailor("rm", "echo", home=home).stdout == "Removed echo\n"
    gone = tailor("rm", "echo", home=home)
    assert gone.returncode == 1 and gone.stderr == f"tailor: error: no MCP server named echo in {config}\n"


def test_a_failing_server_prints_why_with_its_stderr_and_exits_1(tmp_path: Path):
    home = tmp_path / "home"
    tailor("add", "bad", "--", sys.executable, str(BAD), "exit", home=home)
    result = tailor("test", "bad", home=home)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("tailor: error: bad failed after ")
    assert lines[0].endswith(" s: the server exited before it was ready")
    assert lines[1:] == ["its stderr (last lines):", "    bad_server: mode exit (pid " + lines[2].split("(pid ")[1],
                         "    bad_server: cannot start: MISSING_API_KEY is not set"]


def test_url_servers_and_bad_input(tmp_path: Path):
    home = tmp_path / "home"
    added = tailor("add", "web", "--url", "https://example.com/mcp?x=1", "--header", "Authorization: Bearer b-1",
                   home=home)
    assert added.returncode == 0, added.stderr
    assert tailor("ls", home=home).stdout == "web  enabled   http: https://example.com/mcp (headers: Authorization)\n"
    for args, error in [
        (("add", "x"), "give the server a command (after --) or a --url, one of the two"),
        (("add", "x", "--url", "https://a", "--", "run"), "give the server a command (after --) or a --url, one of the two"),
        (("add", "x", "--env", "NOEQUALS", "--", "run"), "--env takes K=V"),
        (("add", "web", "--", "run"), f"{home / 'config' / 'mcp.json'} has a server named web already"),
        (("test", "nope"), f"no MCP server named nope in {home / 'config' / 'mcp.json'}")]:
        result = tailor(*args, home=home)
        assert (result.returncode, result.stderr) == (1, f"tailor: error: {error}\n"), args


def test_import_from_a_file_and_from_a_known_app(tmp_path: Path):
    home = tmp_path / "home"
    other = tmp_path / "claude.json"
    other.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://b"}}}))
    result = tailor("import", str(other), home=home)
    assert (result.returncode, result.stdout) == (0, f"Imported 2 server(s) from {other}: a, b\n")
    again = tailor("import", str(other), home=home)
    assert again.stdout == (f"Imported 0 server(s) from {other}\n"
                            "Skipped (a server of that name exists already): a, b\n")
    lmstudio = Path(os.environ["HOME"]) / ".lmstudio" / "mcp.json"  # the session's own home (tests/isolation.py)
    missing = tailor("import", "lmstudio", home=home)
    if not lmstudio.exists():
        assert missing.stderr == f"tailor: error: no MCP configuration at {lmstudio}\n"
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = tailor("import", str(broken), home=home)
    assert result.returncode == 1 and result.stderr.startswith(f"tailor: error: {broken}: not JSON (")

"""`tailor mcp add-builtin` and the built-in servers from the command line, run as `python -m app.launcher`
from this checkout (what a source checkout's Tailor runs its built-ins with), the configuration under
TAILOR_HOME and no system keyring: added, listed, tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def tailor(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAILOR_HOME": str(home), "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    return subprocess.run([sys.executable, "-m", "app.launcher", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def test_built_ins_are_offered_added_listed_and_tested(tmp_path: Path):
    home, notes = tmp_path / "home", tmp_path / "notes"
    notes.mkdir()
    empty = tailor("mcp", "ls", home=home)
    assert "`tailor mcp add-builtin clock`, `tailor mcp add-builtin files FOLDER`" in empty.stdout
    added = tailor("mcp", "add-builtin", "clock", home=home)
    assert (added.returncode, added.stdout) == (0, "Added clock: built-in clock (the current time and time zones)\n")
    added = tailor("mcp", "add-builtin", "files", str(notes), "--name", "notes", "--disabled", home=home)
    assert added.stdout == f"Added notes: built-in files: reads {notes.resolve()}, never writes (disabled)\n"
    listed = tailor("mcp", "ls", home=home)
    assert listed.stdout == ("clock  enabled   built-in clock (the current time and time zones)\n"
                             f"notes  disabled  built-in files: reads {notes.resolve()}, never writes\n")
    assert json.loads((home / "config" / "mcp.json").read_text())["mcpServers"]["clock"] == {"builtin": "clock"}
    tested = tailor("mcp", "test", "clock", home=home)
    assert tested.returncode == 0, tested.stderr
    first, *tools = tested.stdout.splitlines()
    assert first.startswith("clock: ready in ") and first.endswith(" s, 2 tool(s)")
    assert tools == ["  current_time: The current date and time, here or in a time zone.",
                     "  convert_time: Convert a time of day from one time zone to another."]
    files = tailor("mcp", "test", "notes", home=home)
    assert files.returncode == 0 and files.stdout.splitlines()[0].endswith(
        " s, 3 tool(s) (disabled: models are not offered its tools)"), files.stderr


def test_wrong_built_ins_are_one_line(tmp_path: Path):
    home = tmp_path / "home"
    tailor("mcp", "add-builtin", "clock", home=home)
    for args, error in [
            (("clock",), f"{home / 'config' / 'mcp.json'} has a server named clock already; give it another with --name"),
            (("files",), "the files server reads one folder: tailor mcp add-builtin files FOLDER"),
            (("files", str(tmp_path / "nope")), f"{tmp_path / 'nope'} is not a folder"),
            (("clock", str(tmp_path)), "the clock server takes no folder")]:
        result = tailor("mcp", "add-builtin", *args, home=home)
        assert (result.returncode, result.stderr) == (1, f"tailor: error: {error}\n"), args
    help_text = tailor("mcp", "--help", home=home).stdout
    assert "add-builtin" in help_text and "{ls,add,add-builtin,rm,test,import}" in help_text
    assert " builtin " not in help_text  # the servers themselves are Tailor's to run


"""mcp.json: the mcpServers shape, secrets in the key store (never in the file), clear errors, imports."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from app.mcp.builtin.launch import builtin_config, builtin_server, folder_root
from app.mcp.config import ConfigError, McpConfig, secret_id
from app.mcp.known_configs import candidates, locate
from app.mcp.types import BuiltinServer, ServerConfig
from app.services.key_store import NO_KEYRING, KeyStore
from tests.app.remote.test_endpoints import MemoryKeyring


@pytest.fixture
def config(tmp_path: Path) -> McpConfig:
    return McpConfig(tmp_path / "config" / "mcp.json", KeyStore(tmp_path / "secrets.json", backend=NO_KEYRING))


def test_servers_round_trip_with_their_secrets_kept_apart(config: McpConfig, tmp_path: Path):
    files = ServerConfig("files", command="npx", args=("-y", "server-files", "/home"), env={"TOKEN": "t-123"},
                         timeout_s=30, always_allow=("read_file",))
    web = ServerConfig("web", url="https://example.com/mcp", headers={"Authorization": "Bearer b-456"},
                       enabled=False)
    config.add(files)
    config.add(web)
    text = config.file.read_text()
    assert "t-123" not in text and "b-456" not in text
    assert json.loads(text) == {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files", "/home"], "env": {"TOKEN": "${keyring}"},
                  "timeout": 30.0, "alwaysAllow": ["read_file"]},
        "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "${keyring}"}, "disabled": True}}}
    assert stat.S_IMODE(config.file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets.json").stat().st_mode) == 0o600
    assert config.load().servers == [files, web]
    assert config.load().errors == []
    config.remove("files")
    assert config.keys.get(secret_id("files", "env", "TOKEN")) is None
    assert [s.name for s in config.load().servers] == ["web"]
    assert not list(config.file.parent.glob("*.tmp"))


def test_secrets_go_to_a_usable_keyring(tmp_path: Path):
    keyring = MemoryKeyring()
    config = McpConfig(tmp_path / "mcp.json", KeyStore(tmp_path / "secrets.json", backend=keyring))
    config.add(ServerConfig("s", command="run", env={"K": "v1"}))
    assert list(keyring.secrets.values()) == ["v1"] and not (tmp_path / "secrets.json").exists()
    config.add(ServerConfig("s", command="run", env={"J": "v2"}), replace=True)
    assert list(keyring.secrets.values()) == ["v2"]  # the key it no longer has is forgotten
    with pytest.raises(ConfigError, match="has a server named s already"):
        config.add(ServerConfig("s", command="other"))


def test_a_bad_entry_is_one_error_naming_the_file_and_field_and_the_rest_load(config: McpConfig):
    config.file.parent.mkdir(parents=True)
    config.file.write_text(json.dumps({"theme": "dark", "mcpServers": {
        "good": {"command": "run", "futureKey": 1},
        "badargs": {"command": "run", "args": "--flag"},
        "badenv": {"command": "run", "env": {"KEY": 12345}},
        "lost": {"command": "run", "env": {"KEY": "${keyring}"}},
        "both": {"command": "run", "url": "https://x"},
        "neither": {"args": []},
        "slow": {"command": "run", "timeout": "soon"},
        "jan": {"command": "run", "active": False}}}))
    loaded = config.load()
    assert [(s.name, s.enabled) for s in loaded.servers] == [("good", True), ("jan", False)]
    where = f"{config.file}: mcpServers"
    assert loaded.errors == [
        f"{where}.badargs: args: must be a list of strings",
        f"{where}.badenv: env.KEY: must be a string, not a number",
        f"{where}.lost: env.KEY: its value is not in the keyring any more; set it again",
        f"{where}.both: has both a `command` and a `url`; keep one",
        f"{where}.neither: needs a `command` (a program to run) or a `url`",
        f"{where}.slow: timeout: must be a positive number of seconds"]
    assert "12345" not in " ".join(loaded.errors)
    config.add(ServerConfig("new", command="x"))  # keys Tailor does not know are kept
    document = json.loads(config.file.read_text())
    assert document["theme"] == "dark" and document["mcpServers"]["good"]["futureKey"] == 1


@pytest.mark.parametrize(("text", "error"), [
    ("{ not json", "not JSON (Expecting property name enclosed in double quotes at line 1, column 3)"),
    ('["a"]', "must hold a JSON object with `mcpServers`"),
    ('{"mcpServers": []}', "mcpServers: must be an object of server names to servers")])
def test_a_file_that_cannot_be_read_is_one_error_and_never_overwritten(config: McpConfig, text: str, error: str):
    config.file.parent.mkdir(parents=True)
    config.file.write_text(text)
    assert config.load().errors == [f"{config.file}: {error}"]
    with pytest.raises(ConfigError, match="^" + str(config.file)):
        config.add(ServerConfig("x", command="y"))
    assert config.file.read_text() == text


def test_import_adds_new_servers_and_never_overwrites(config: McpConfig, tmp_path: Path):
    config.add(ServerConfig("files", command="mine"))
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(json.dumps({"mcpServers": {
        "files": {"command": "theirs"},
        "github": {"command": "npx", "args": ["-y", "gh"], "env": {"GITHUB_TOKEN": "ghp_secret"}},
        "broken": {"command": 5}}}))
    report = config.import_from(claude)
    assert (report.added, report.skipped) == (["github"], ["files"])
    assert report.errors == [f"{claude}: mcpServers.broken: command: must be a string, not a number"]
    assert "ghp_secret" not in config.file.read_text()
    servers = {s.name: s for s in config.load().servers}
    assert servers["files"].command == "mine" and servers["github"].env == {"GITHUB_TOKEN": "ghp_secret"}


def test_known_locations_of_other_apps(tmp_path: Path):
    home = tmp_path
    assert candidates("claude", home=home, env={}, platform="linux") == [
        home / ".config/Claude/claude_desktop_config.json"]
    assert candidates("claude", home=home, env={}, platform="darwin") == [
        home / "Library/Application Support/Claude/claude_desktop_config.json"]
    assert candidates("claude", home=home, env={"APPDATA": str(home / "Roaming")}, platform="win32") == [
        home / "Roaming/Claude/claude_desktop_config.json"]
    assert candidates("lmstudio", home=home, env={}, platform="linux") == [home / ".lmstudio/mcp.json"]
    jan = candidates("jan", home=home, env={}, platform="linux")
    assert jan == [home / ".local/share/Jan/data/mcp_config.json", home / ".config/Jan/data/mcp_config.json"]
    jan[1].parent.mkdir(parents=True)
    jan[1].write_text("{}")
    assert locate("jan", home=home, env={}, platform="linux") == jan[1]


def test_a_server_is_turned_off_and_on_and_its_tools_allowed_for_good(config: McpConfig):
    config.add(ServerConfig("files", command="npx", env={"TOKEN": "t-1"}))
    config.set_enabled("files", False)
    assert config.load().servers[0].enabled is False
    config.set_enabled("files", True)
    config.allow_tool("files", "read_file")
    config.allow_tool("files", "read_file")  # once is enough
    config.allow_tool("files", "list_dir")
    (files,) = config.load().servers
    assert files.enabled and files.always_allow == ("read_file", "list_dir") and files.env == {"TOKEN": "t-1"}
    assert "t-1" not in config.file.read_text()
    with pytest.raises(ConfigError, match="no server named nope"):
        config.allow_tool("nope", "x")
    with pytest.raises(ConfigError, match="no server named nope"):
        config.set_enabled("nope", False)


def test_a_built_in_server_is_kept_by_its_name_and_runs_this_tailor(config: McpConfig, tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    config.add(builtin_config("clock", builtin_server("clock"), enabled=False))
    config.add(builtin_config("notes", builtin_server("files", folder_root(notes))))
    document = json.loads(config.file.read_text())
    assert document == {"mcpServers": {"clock": {"builtin": "clock", "disabled": True},
                                       "notes": {"builtin": "files", "root": str(notes.resolve())}}}
    clock, files = config.load().servers
    assert (clock.builtin, clock.enabled, files.builtin) == (BuiltinServer("clock"), False,
                                                             BuiltinServer("files", str(notes.resolve())))
    # The launch is worked out when the file is read, never stored: a moved or updated Tailor still runs them.
    assert (files.command, files.args) == (sys.executable, ("-m", "app.launcher", "mcp", "builtin", "files",
                                                            "--root", str(notes.resolve())))
    document["mcpServers"]["clock"]["note"] = "mine"  # a key Tailor does not know is kept
    config.file.write_text(json.dumps(document))
    config.set_enabled("clock", True)
    config.allow_tool("clock", "current_time")
    assert json.loads(config.file.read_text())["mcpServers"]["clock"] == {
        "builtin": "clock", "note": "mine", "alwaysAllow": ["current_time"]}


def test_a_built_in_entry_that_cannot_be_used_is_one_error(config: McpConfig):
    config.file.parent.mkdir(parents=True)
    config.file.write_text(json.dumps({"mcpServers": {
        "a": {"builtin": "weather"}, "b": {"builtin": "files"}, "c": {"builtin": "files", "root": "notes"},
        "d": {"builtin": "clock", "command": "run"}, "e": {"builtin": "clock"}}}))
    loaded = config.load()
    assert [s.name for s in loaded.servers] == ["e"]
    assert [e.split(": ", 1)[1] for e in loaded.errors] == [
        "mcpServers.a: builtin: no built-in server named 'weather' (there are clock, files)",
        "mcpServers.b: builtin: the files server needs `root`, the folder it reads",
        "mcpServers.c: builtin: root must be an absolute folder, not 'notes'",
        "mcpServers.d: has a `builtin` and a `command` or `url`; keep one"]


def test_frozen_tailor_runs_its_own_executable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    config = builtin_config("clock", builtin_server("clock"))
    assert (config.command, config.args) == (sys.executable, ("mcp", "builtin", "clock"))

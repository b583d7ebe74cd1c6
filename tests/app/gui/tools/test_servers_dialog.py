"""The MCP servers dialog: the servers listed with their state, a failed one's reason and stderr tail,
Add/Remove/Enable/Import through the store, statuses from a background thread (real widgets, offscreen; the store
and the servers are the in-memory doubles of servers_double.py). The Tools button: test_tools_button.py."""

from __future__ import annotations

import json
import threading

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from app.gui.tools.import_sources import ImportSource, import_sources
from app.gui.tools.protocols import StatusRelay
from app.gui.tools.server_entry import parse_pairs, server_config
from app.gui.tools.server_list import NAME, STATUS, TRANSPORT
from app.gui.tools.servers_dialog import ServersDialog
from app.mcp.builtin.launch import builtin_config
from app.mcp.types import BuiltinServer, ServerConfig, ServerStatus
from tests.app.gui.tools.servers_double import MemoryStore, Servers, tool

WAIT_MS = 3000
FILES = ServerConfig("files", command="npx", args=("-y", "@mcp/server-filesystem", "/home/me/notes"))
WEB = ServerConfig("web", url="https://example.com/mcp", enabled=False)
READY = ServerStatus("files", "ready", tools=(tool("files", "read_file", "Reads a file."), tool("files", "list")),
                     left_out=("bad_tool: its input schema is not JSON Schema",))
FAILED = ServerStatus("web", "failed", reason="HTTP 401 from https://example.com/mcp",
                      stderr_tail="connecting…\nerror: unauthorized")


@pytest.fixture
def parts(qtbot, tmp_path):
    store, servers = MemoryStore([FILES, WEB]), Servers([READY, FAILED])
    source = tmp_path / "claude_desktop_config.json"
    dialog = ServersDialog(store, servers, sources=[ImportSource("Claude Desktop", source)], ask=lambda _q: True)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog, store, servers, source


def cell(dialog: ServersDialog, row: int, column: int, role=Qt.ItemDataRole.DisplayRole):  # noqa: ANN001, ANN201
    return dialog.model.data(dialog.model.index(row, column), role)


def test_the_servers_are_listed_with_their_transport_state_and_tools(parts):
    dialog = parts[0]
    assert dialog.model.rowCount() == 2
    assert cell(dialog, 0, NAME) == "files" and cell(dialog, 0, TRANSPORT) == "npx -y @mcp/server-filesystem /home/me/notes"
    assert cell(dialog, 0, STATUS) == "ready · 2 tools"
    assert cell(dialog, 0, NAME, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    assert cell(dialog, 1, NAME, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert dialog.tools.toPlainText() == ("read_file — Reads a file.\nlist\n\nLeft out:\n"
                                          "bad_tool: its input schema is not JSON Schema")


def test_a_failed_server_shows_its_reason_and_stderr_tail(parts):
    dialog = parts[0]
    assert cell(dialog, 1, STATUS) == "failed: HTTP 401 from https://example.com/mcp"
    dialog.table.selectRow(1)
    assert dialog.reason.isVisible() and dialog.reason.text() == "web failed: HTTP 401 from https://example.com/mcp"
    assert dialog.stderr.toPlainText() == "connecting…\nerror: unauthorized"


def test_add_checks_the_form_then_adds_and_starts_the_server(qtbot, parts):
    dialog, store, servers, _ = parts
    form = dialog.add_server()
    form.name.setText("files")
    form.command.setText("uvx")
    form.args.setText('mcp-server-time --zone "Europe/Paris"')
    form.env.setPlainText("TZ=UTC\nbroken line")
    form.accept()
    assert form.isVisible() and form.problem.text() == "Environment, line 2: write KEY=VALUE, not 'broken line'"
    form.env.setPlainText("TZ=UTC")
    form.accept()
    assert form.problem.text() == "A server named files is already configured."  # the store said so
    form.name.setText("time")
    form.accept()
    assert not form.isVisible()
    assert store.configs[-1] == ServerConfig("time", command="uvx", args=("mcp-server-time", "--zone", "Europe/Paris"),
                                             env={"TZ": "UTC"})
    assert servers.calls == [("start", ("time",))] and dialog.selected_name() == "time"


def test_remove_stops_the_server_and_removes_it_from_the_store(qtbot, parts):
    dialog, store, servers, _ = parts
    dialog.table.selectRow(1)
    with qtbot.waitSignal(dialog.servers_changed, timeout=WAIT_MS):
        dialog.remove_selected()
    assert [c.name for c in store.configs] == ["files"] and servers.calls == [("stop", ("web",))]
    assert dialog.model.rowCount() == 1


def test_unchecking_a_server_disables_it_in_the_store(parts):
    dialog, store, servers, _ = parts
    assert dialog.model.setData(dialog.model.index(0, NAME), Qt.CheckState.Unchecked.value,
                                Qt.ItemDataRole.CheckStateRole)
    assert not store.configs[0].enabled and servers.calls == [("stop", ("files",))]
    assert cell(dialog, 0, NAME, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked


def test_import_says_what_was_added_and_skipped_and_a_bad_file_in_one_line(parts):
    dialog, store, _, source = parts
    source.write_text(json.dumps({"mcpServers": {"files": {"command": "npx"}, "git": {"command": "uvx"}}}))
    dialog.import_from(source)
    assert dialog.message.text() == "Imported 1 server (git); skipped 1 already here or not valid (files)."
    assert dialog.model.rowCount() == 3
    source.write_text("{not json")
    dialog.import_from(source)
    assert dialog.message.text().startswith("Could not import from claude_desktop_config.json: ")
    assert "\n" not in dialog.message.text() and len(store.configs) == 3


def test_test_restarts_the_selected_server_and_its_status_follows(qtbot, parts):
    dialog, _, servers, _ = parts
    dialog.test_selected()
    assert servers.calls == [("stop", ("files",)), ("start", ("files",))]
    dialog.on_status(ServerStatus("files", "failed", reason="the command npx was not found",
                                  stderr_tail="sh: npx: not found"))
    assert cell(dialog, 0, STATUS) == "failed: the command npx was not found"
    assert dialog.stderr.toPlainText() == "sh: npx: not found"


def test_statuses_from_another_thread_arrive_on_the_gui_thread(qtbot, parts):
    dialog = parts[0]
    relay = StatusRelay(dialog)
    seen: list[bool] = []
    relay.status.connect(lambda _s: seen.append(threading.current_thread() is threading.main_thread()))
    relay.status.connect(dialog.on_status)
    thread = threading.Thread(target=lambda: [relay.post(ServerStatus("files", "starting")),
                                              relay.post(READY)])
    thread.start()
    thread.join(timeout=5)
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=WAIT_MS)
    assert seen == [True, True] and cell(dialog, 0, STATUS) == "ready · 2 tools"


def test_the_form_refuses_what_would_not_run():
    with pytest.raises(ValueError, match="either a command"):
        server_config("x", command="npx", url="https://a.b/mcp")
    with pytest.raises(ValueError, match="http:// or https://"):
        server_config("x", url="file:///etc/passwd")
    with pytest.raises(ValueError, match="no spaces"):
        server_config("my server", command="npx")
    with pytest.raises(ValueError, match="Arguments: No closing quotation"):
        server_config("x", command="npx", args='"unclosed')
    assert server_config("x", url="https://a.b/mcp", headers="Authorization=Bearer t=1").headers == {
        "Authorization": "Bearer t=1"}
    assert parse_pairs("# note\n\nA=1\n", "Environment") == {"A": "1"}


def test_the_import_sources_are_where_each_app_keeps_them(tmp_path):
    linux = {s.app: s.path for s in import_sources(tmp_path, "linux", {})}
    assert linux["Claude Desktop"] == tmp_path / ".config/Claude/claude_desktop_config.json"
    assert linux["LM Studio"] == tmp_path / ".lmstudio/mcp.json"
    assert linux["Jan"] == tmp_path / ".local/share/Jan/data/mcp_config.json"
    mac = {s.app: s.path for s in import_sources(tmp_path, "darwin", {})}
    assert mac["Claude Desktop"] == tmp_path / "Library/Application Support/Claude/claude_desktop_config.json"
    windows = {s.app: s.path for s in import_sources(tmp_path, "win32", {"APPDATA": str(tmp_path / "Roaming")})}
    assert windows["Jan"] == tmp_path / "Roaming/Jan/data/mcp_config.json"


def test_add_built_in_adds_the_clock_once_and_starts_it(qtbot, parts):
    dialog, store, servers, _ = parts
    clock, files = dialog.builtin_button.menu().actions()
    assert (clock.text(), files.text()) == ("Clock: the current time and time zones", "Files in a folder (read only)…")
    with qtbot.waitSignal(dialog.servers_changed, timeout=WAIT_MS):
        clock.trigger()
    assert store.configs[-1] == builtin_config("clock", BuiltinServer("clock"))
    assert servers.calls[-1] == ("start", ("clock",)) and dialog.message.text() == "Added clock; starting it."
    assert dialog.selected_name() == "clock"
    assert cell(dialog, 2, TRANSPORT) == "built-in clock (the current time and time zones)"
    dialog.table.selectRow(0)
    clock.trigger()
    assert len(store.configs) == 3 and dialog.message.text() == "The clock is added already, as clock."
    assert dialog.selected_name() == "clock"


def test_add_built_in_files_asks_for_a_folder_and_takes_a_free_name(qtbot, parts, tmp_path, monkeypatch):
    dialog, store, servers, _ = parts
    notes = tmp_path / "notes"
    notes.mkdir()
    chosen = iter(["", str(notes)])  # cancelled first, then a folder
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_args: next(chosen))
    dialog.add_files()
    assert len(store.configs) == 2 and servers.calls == []
    dialog.add_files()
    added = store.configs[-1]
    assert added.name == "files-2" and added.builtin == BuiltinServer("files", str(notes.resolve()))  # files: taken
    assert servers.calls == [("start", ("files-2",))]
    assert cell(dialog, 2, TRANSPORT) == f"built-in files: reads {notes.resolve()}, never writes"

"""`tailor chats ls|rm`, `tailor export` and `tailor import` over a real history file: a few cases through the
installed console script in a subprocess (as a user runs it), the rest through `main()` in this process."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from app.cli.main import main
from app.services.chat_export import load_chats, to_json
from app.services.paths import AppPaths
from app.services.store import ChatStore
from tests.app.history_files import chats_of
from tests.app.test_chat_export import make_history
from tests.app.test_cli import tailor


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    """TAILOR_HOME with the two chats of make_history in its history file, for main() and for subprocesses."""
    home = tmp_path / "home"
    monkeypatch.setenv("TAILOR_HOME", str(home))
    make_history(AppPaths.default().chat_db).close()
    return home


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_then_import_through_the_command(home: Path, tmp_path: Path):
    exported = tailor("export", "--all", "--format", "json", home=home, timeout=60)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["format"] == "tailor-chats"
    path = tmp_path / "chats.json"
    path.write_text(exported.stdout, encoding="utf-8")
    other = tmp_path / "other.sqlite3"
    imported = tailor("import", str(path), "--db", str(other), home=home, timeout=60)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == f"Imported 2 chat(s) from {path}\n"
    again = tailor("export", "--all", "--format", "json", "--db", str(other), home=home, timeout=60)
    assert again.stdout == exported.stdout


def test_a_bad_import_is_one_line_on_stderr_and_exit_1(home: Path, tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "tailor-chats", "version": 1, "chats": [', encoding="utf-8")
    result = tailor("import", str(bad), home=home, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("tailor: error: ") and "invalid JSON at line 1" in line and "Traceback" not in line
    store = ChatStore(AppPaths.default().chat_db)
    assert [title for title, _ in chats_of(store)] == ["Maths", "Code / <b>HTML</b>\x07"]
    store.close()


def test_ls_lists_number_title_messages_and_updated(home: Path, capsys):
    code, out, _ = run(capsys, "chats", "ls")
    assert code == 0
    code_line, maths_line = out.splitlines()  # most recently updated first
    assert code_line.split()[0] == "2" and code_line.endswith("4 messages  Code / <b>HTML</b>")
    assert maths_line.split()[0] == "1" and maths_line.endswith("3 messages  Maths") and " UTC " in maths_line
    code, out, _ = run(capsys, "chats", "--json")
    chats = json.loads(out)["chats"]
    assert [(c["number"], c["title"], c["messages"]) for c in chats] == [
        (2, "Code / <b>HTML</b>\x07", 4), (1, "Maths", 3)]
    assert all(len(c["id"]) == 36 and c["updated"] >= c["created"] for c in chats)


def test_ls_of_a_history_that_is_not_there(tmp_path: Path, capsys):
    code, out, _ = run(capsys, "chats", "ls", "--db", str(tmp_path / "none.sqlite3"))
    assert (code, out) == (0, "No chats.\n")
    assert not (tmp_path / "none.sqlite3").exists()


def test_rm_by_number_or_uuid_and_an_unknown_one(home: Path, capsys):
    store = ChatStore(AppPaths.default().chat_db)
    uid = store.conversation_uid(2)
    store.close()
    assert run(capsys, "chats", "rm", "1") == (0, "Deleted chat 1: Maths\n", "")
    assert run(capsys, "chats", "rm", uid)[0] == 0
    code, out, err = run(capsys, "chats", "rm", "1")
    assert (code, out) == (1, "") and err == "tailor: error: No chat '1' (see `tailor chats ls`).\n"
    assert run(capsys, "chats", "ls")[1] == "No chats.\n"


def test_export_one_chat_as_markdown_and_html_to_stdout(home: Path, capsys):
    code, out, _ = run(capsys, "export", "--chat", "1", "--format", "md")
    assert code == 0 and out.startswith("# Maths\n") and "### Assistant" in out and "Code / " not in out
    code, out, _ = run(capsys, "export", "--chat", "2", "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and "<script" not in out.lower()


def test_export_all_to_one_file_or_one_file_per_chat_in_a_folder(home: Path, tmp_path: Path, capsys):
    one = tmp_path / "all.md"
    code, out, err = run(capsys, "export", "--all", "--format", "md", "-o", str(one))
    assert (code, out) == (0, "") and err == f"Wrote 2 chat(s) to {one}\n"
    assert one.read_text().count("\n# ") == 1 and one.read_text().startswith("# Maths")
    assert stat.S_IMODE(one.stat().st_mode) == 0o666 & ~_umask()
    folder = tmp_path / "chats"
    folder.mkdir()
    assert run(capsys, "export", "--all", "--format", "html", "-o", str(folder))[0] == 0
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2 and names[0].startswith("Code - -b-HTML-b-") and names[1].startswith("Maths-")
    assert all(n.endswith(".html") for n in names)


def test_export_errors_are_one_line(home: Path, tmp_path: Path, capsys):
    code, _, err = run(capsys, "export", "--chat", "42", "--format", "json")
    assert code == 1 and err == "tailor: error: No chat '42' (see `tailor chats ls`).\n"
    code, _, err = run(capsys, "export", "--all", "--format", "md", "-o", str(tmp_path / "no" / "such" / "x.md"))
    assert code == 1 and err.startswith("tailor: error: Cannot write ") and err.count("\n") == 1
    assert not list(tmp_path.glob("**/*.part"))
    code, _, err = run(capsys, "export", "--all", "--format", "json", "--db", str(tmp_path / "none.sqlite3"))
    assert code == 1 and err == f"tailor: error: No chat history at {tmp_path / 'none.sqlite3'}\n"
    empty = tmp_path / "empty.sqlite3"
    ChatStore(empty).close()
    code, _, err = run(capsys, "export", "--all", "--format", "json", "--db", str(empty))
    assert code == 1 and err == "tailor: error: There are no chats to export.\n"


def test_import_twice_says_what_it_kept(home: Path, tmp_path: Path, capsys):
    store = ChatStore(AppPaths.default().chat_db)
    path = tmp_path / "chats.json"
    path.write_text(to_json(load_chats(store)), encoding="utf-8")
    store.close()
    code, out, _ = run(capsys, "import", str(path))
    assert (code, out) == (0, f"Imported 0 chat(s) from {path}; 2 already there, kept as they are\n")
    code, _, err = run(capsys, "import", str(tmp_path / "missing.json"))
    assert code == 1 and err.startswith("tailor: error: Cannot read ") and "missing.json" in err


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_import_of_a_chatgpt_export_says_what_it_skipped(home: Path, tmp_path: Path, capsys):
    from tests.app.test_chat_import import chatgpt_export

    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([*chatgpt_export(), "nonsense"]), encoding="utf-8")
    code, out, err = run(capsys, "import", str(path))
    assert code == 0
    assert out == f"Imported 2 chat(s) from {path} (ChatGPT); 3 could not be read\n"
    assert err.splitlines() == [
        "tailor: Skipped conversation 2 ('Round and round'): its messages' parents form a cycle (at node 'x')",
        "tailor: Skipped conversation 3 ('Orphan'): message 'gone' is missing from its mapping",
        "tailor: Skipped conversation 5: it is not an object",
    ]
    assert "Tools and images" in run(capsys, "chats", "ls")[1]

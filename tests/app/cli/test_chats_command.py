"""`tailor chats ls|rm|mv|pin|unpin|folders`, `tailor export` and `tailor import` over a real history file: a few
cases through the installed console script in a subprocess (as a user runs it), the rest through `main()` in this
process."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from app.cli.main import main
from app.services.history.store import ChatStore
from app.services.media.intake import read_image
from app.services.paths import AppPaths
from app.services.transfer.export import load_chats, to_json
from tests.app.cli.test_chat_command import tailor
from tests.app.services.history.history_files import chats_of
from tests.app.services.media.images import red_square, save
from tests.app.services.transfer.test_export import add_branches, make_history
from tests.app.services.transfer.test_import_chatgpt import chatgpt_export


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
    bad.write_text("not json", encoding="utf-8")
    result = tailor("import", str(bad), home=home, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line == f"tailor: error: {bad} is not a Tailor chat export: invalid JSON (Expecting value) at byte 0"
    store = ChatStore(AppPaths.default().chat_db)
    assert [title for title, _ in chats_of(store)] == ["Maths", "Code / <b>HTML</b>\x07"]
    store.close()


def test_a_file_cut_part_way_imports_up_to_the_cut_and_exits_1(home: Path, tmp_path: Path):
    exported = tailor("export", "--all", "--format", "json", home=home, timeout=60).stdout
    cut = tmp_path / "cut.json"
    cut.write_text(exported[: exported.index('"title": "Code')], encoding="utf-8")  # inside the second chat
    other = tmp_path / "other.sqlite3"
    result = tailor("import", str(cut), "--db", str(other), home=home, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (f"tailor: error: {cut} breaks in chat 2 at byte {cut.stat().st_size:,} (the file ends"
                             " early); the 1 chat(s) were imported before it\n")
    store = ChatStore(other)
    assert [title for title, _ in chats_of(store)] == ["Maths"]
    store.close()


def test_a_refused_file_creates_no_history(tmp_path: Path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "tailor-chats", "version": 99, "chats": []}', encoding="utf-8")
    code, out, err = run(capsys, "import", str(bad), "--db", str(tmp_path / "new.sqlite3"))
    assert (code, out) == (1, "") and "written by a newer Tailor (export version 99" in err
    assert not (tmp_path / "new.sqlite3").exists()


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


def test_export_carries_images_beside_the_file_or_embedded_and_import_takes_them_back(home: Path, tmp_path: Path,
                                                                                     capsys):
    photo = read_image(save(red_square(), tmp_path / "photo.png", "PNG"))
    store = ChatStore(AppPaths.default().chat_db)
    chat = store.create_conversation("Picture")
    store.add_message(chat.id, "user", "What is this?", images=[photo])
    store.close()
    target = tmp_path / "out.json"
    assert run(capsys, "export", "--chat", str(chat.id), "--format", "json", "-o", str(target))[0] == 0
    assert (tmp_path / "out-media" / f"{photo.sha256}.png").read_bytes() == photo.original
    code, out, err = run(capsys, "export", "--chat", str(chat.id), "--format", "json", "--embed-media")
    assert code == 0 and err == ""
    embedded = tmp_path / "embedded.json"
    embedded.write_text(out)
    for source, db in ((target, "beside.sqlite3"), (embedded, "embedded.sqlite3")):
        code, _, err = run(capsys, "import", str(source), "--db", str(tmp_path / db))
        assert code == 0 and err == ""
        other = ChatStore(tmp_path / db)
        assert [m.images for m in other.list_messages(other.list_conversations()[0].id)][0][0].sha256 == photo.sha256
        assert other.media.read(photo.sha256) == photo.original
        other.close()
    ChatStore(AppPaths.default().chat_db).media.remove(photo.sha256)  # gone from the history: said, not fatal
    code, out, err = run(capsys, "export", "--chat", str(chat.id), "--format", "md")
    assert code == 0 and "*\\[image: photo.png\\]*" in out
    code, out, err = run(capsys, "export", "--chat", str(chat.id), "--format", "html")
    assert code == 0 and err.startswith("tailor: photo.png was left out of the export: The image")


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


def _ls(capsys, *args: str) -> list[dict]:
    code, out, _ = run(capsys, "chats", "ls", "--json", *args)
    assert code == 0
    return json.loads(out)["chats"]


def test_mv_files_a_chat_creating_the_folder_once(home: Path, capsys):
    assert run(capsys, "chats", "mv", "1", " Work ") == (
        0, "Created folder 'Work'.\nMoved chat 1 (Maths) to 'Work'.\n", "")
    assert run(capsys, "chats", "mv", "2", "WORK") == (0, "Moved chat 2 (Code / <b>HTML</b>) to 'Work'.\n", "")
    assert [(c["number"], c["folder"]) for c in _ls(capsys)] == [(2, "Work"), (1, "Work")]
    assert run(capsys, "chats", "mv", "1", "--none") == (0, "Chat 1 (Maths) is in no folder.\n", "")
    assert [(c["number"], c["folder"]) for c in _ls(capsys)] == [(2, "Work"), (1, None)]
    assert run(capsys, "chats", "folders") == (0, "    1 chat  Work\n    1 chat  (in no folder)\n", "")


@pytest.mark.parametrize(("args", "error"), [
    (("mv", "9", "Work"), "No chat '9' (see `tailor chats ls`)."),
    (("mv", "1"), "Give the folder's name, or --none to take the chat out of its folder."),
    (("mv", "1", "Work", "--none"), "Give the folder's name, or --none to take the chat out of its folder."),
    (("mv", "1", "   "), "A folder needs a name."),
    (("mv", "1", "x" * 81), "A folder's name is at most 80 characters."),
    (("pin", "nope"), "No chat 'nope' (see `tailor chats ls`)."),
    (("unpin", "0"), "No chat '0' (see `tailor chats ls`)."),
    (("ls", "--folder", "Nowhere"), "No folder 'Nowhere' (see `tailor chats folders`)."),
])
def test_chats_errors_are_one_line_and_exit_1(home: Path, capsys, args: tuple[str, ...], error: str):
    before = _ls(capsys)
    code, out, err = run(capsys, "chats", *args)
    assert (code, out, err) == (1, "", f"tailor: error: {error}\n")
    assert _ls(capsys) == before and run(capsys, "chats", "folders")[1] == "No folders.\n"


def test_pin_and_unpin_put_a_chat_first_and_back(home: Path, capsys):
    assert [c["number"] for c in _ls(capsys)] == [2, 1]
    assert run(capsys, "chats", "pin", "1") == (0, "Pinned chat 1 (Maths).\n", "")
    assert [(c["number"], c["pinned"]) for c in _ls(capsys)] == [(1, True), (2, False)]
    first = run(capsys, "chats", "ls")[1].splitlines()[0]
    assert first.startswith("    1 * ") and first.endswith("3 messages  Maths")
    assert run(capsys, "chats", "unpin", "1") == (0, "Unpinned chat 1 (Maths).\n", "")
    assert [(c["number"], c["pinned"]) for c in _ls(capsys)] == [(2, False), (1, False)]


def test_ls_by_folder_and_by_text_in_any_branch(home: Path, capsys):
    store = ChatStore(AppPaths.default().chat_db)
    branches = add_branches(store)  # in folder "Work"; "Apple" is on a branch it does not show
    store.close()
    code, out, _ = run(capsys, "chats", "ls", "--folder", "work")
    assert code == 0 and len(out.splitlines()) == 1  # pinned (*), in its folder, all its branches' messages
    assert out.startswith(f"{branches:>5} * ") and out.endswith("    7 messages  [Work] Branches\n")
    assert [c["title"] for c in _ls(capsys, "--search", "apple")] == ["Branches"]
    assert [c["title"] for c in _ls(capsys, "--search", "17 * 23")] == ["Maths"]
    assert _ls(capsys, "--search", "nothing like this") == []
    assert run(capsys, "chats", "ls", "--search", "nothing like this")[1] == "No chats.\n"
    assert [c["title"] for c in _ls(capsys, "--folder", "Work", "--search", "Maths")] == []
    code, out, _ = run(capsys, "chats", "folders", "--json")
    assert json.loads(out) == {"folders": [{"name": "Work", "chats": 1}], "in_no_folder": 2}


def test_folders_of_a_history_that_is_not_there(tmp_path: Path, capsys):
    assert run(capsys, "chats", "folders", "--db", str(tmp_path / "none.sqlite3")) == (0, "No folders.\n", "")
    assert not (tmp_path / "none.sqlite3").exists()


def test_export_json_streams_the_same_bytes_as_to_json(home: Path, tmp_path: Path, capsys):
    store = ChatStore(AppPaths.default().chat_db)
    add_branches(store)
    expected = to_json(load_chats(store))
    one = to_json(load_chats(store, [1]))
    store.close()
    assert run(capsys, "export", "--all", "--format", "json") == (0, expected, "")
    path = tmp_path / "one.json"
    assert run(capsys, "export", "--chat", "1", "--format", "json", "-o", str(path)) == (
        0, "", f"Wrote 1 chat(s) to {path}\n")
    assert path.read_text(encoding="utf-8") == one


def test_export_with_files_carries_the_originals_of_attached_documents(home: Path, tmp_path: Path, capsys):
    from app.services.history.store import FileRef

    store = ChatStore(AppPaths.default().chat_db)
    chat = store.create_conversation("Report")
    kept = store.media.put(b"# Report\n\nThe parrot is Archimedes.\n", ".md")
    store.add_message(chat.id, "user", "Who is the parrot?", files=(FileRef(kept.sha256, "MD", "report.md"),))
    store.close()
    code, out, err = run(capsys, "export", "--chat", str(chat.id), "--format", "json", "--with-files", "--embed-media")
    assert code == 0 and err == ""
    (item,) = json.loads(out)["chats"][0]["messages"][0]["files"]
    assert item["name"] == "report.md" and "data" in item
    code, out, err = run(capsys, "export", "--chat", str(chat.id), "--format", "json", "--embed-media")
    assert "data" not in json.loads(out)["chats"][0]["messages"][0]["files"][0]  # without --with-files: named only

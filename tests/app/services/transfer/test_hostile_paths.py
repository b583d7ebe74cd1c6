"""Paths the user names that are no ordinary file (issue 30): `tailor export -o` onto a FIFO, a socket, a
device node or a link, over a file without --force, into a folder where chats' names collide; `tailor import`
of a FIFO or /proc/self/mem; Ctrl+C in `tailor import` and `tailor pull`. Each is refused in one line (or
stops with 130), quickly, and nothing is lost or replaced."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from app.cli.main import main
from app.services.paths import AppPaths
from app.services.transfer.export_files import portable
from tests.app.services.transfer.test_export import make_history
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub

TAILOR = str(Path(sys.executable).with_name("tailor"))
fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TAILOR_HOME", str(home))
    make_history(AppPaths.default().chat_db).close()
    return home


def _export(capsys, *args: str) -> tuple[int, str]:
    code = main(["export", "--all", "--format", "html", *args])
    return code, capsys.readouterr().err


def _refused(capsys, target: Path, *extra: str) -> str:
    code, err = _export(capsys, "-o", str(target), *extra)
    assert code == 1 and err.count("\n") == 1 and err.startswith(f"tailor: error: Cannot write {target}: it is "), err
    assert not list(target.parent.glob(".*.part"))
    return err


def test_export_onto_a_fifo_a_socket_or_a_device_is_refused_and_it_stays(home: Path, tmp_path: Path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    device = tmp_path / "full"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers (CI runs as root)
    try:
        for target, kind in ((fifo, "a FIFO (named pipe)"), (sock_path, "a socket"), (device, "a character device")):
            for force in ((), ("--force",)):
                started = time.monotonic()
                assert kind in _refused(capsys, target, *force)
                assert time.monotonic() - started < 10  # never opened: a FIFO's open would wait for a reader
        assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISSOCK(sock_path.lstat().st_mode)
        assert stat.S_ISCHR(device.lstat().st_mode)
    finally:
        server.close()


def test_export_through_a_symbolic_link_is_refused_and_its_target_kept(home: Path, tmp_path: Path, capsys):
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    link = tmp_path / "link.html"
    link.symlink_to(precious)
    for force in ((), ("--force",)):
        assert "a symbolic link" in _refused(capsys, link, *force)
    assert link.is_symlink() and precious.read_text() == "mine"


def test_export_over_a_file_needs_force(home: Path, tmp_path: Path, capsys):
    mine = tmp_path / "chats.html"
    mine.write_text("my notes")
    code, err = _export(capsys, "-o", str(mine))
    assert (code, err) == (1, f"tailor: error: {mine} exists; use --force to replace it\n")
    assert mine.read_text() == "my notes"
    code, err = _export(capsys, "-o", str(mine), "--force")
    assert (code, err) == (0, f"Wrote 2 chat(s) to {mine}\n")
    assert mine.read_text().startswith("<!DOCTYPE html>")
    code, err = main(["export", "--all", "--format", "json", "-o", str(mine)]), capsys.readouterr().err
    assert code == 1 and "exists; use --force" in err and mine.read_text().startswith("<!DOCTYPE html>")


def test_a_folder_export_replaces_files_only_with_force_and_refuses_a_fifo_among_them(home: Path, tmp_path: Path,
                                                                                       capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    assert _export(capsys, "-o", str(folder)) == (0, f"Wrote 2 chat(s) to {folder}\n")
    written = sorted(folder.iterdir())
    for path in written:
        path.write_text("edited by hand")
    code, err = _export(capsys, "-o", str(folder))
    assert code == 1 and err.startswith(f"tailor: error: 2 files of these chats exist in {folder} (")
    assert all(p.read_text() == "edited by hand" for p in written)
    assert _export(capsys, "-o", str(folder), "--force")[0] == 0
    assert all(p.read_text().startswith("<!DOCTYPE html>") for p in written)
    written[0].unlink()
    os.mkfifo(written[0])  # a FIFO takes one chat's name: the export is refused whole, nothing replaced
    written[1].write_text("edited again")
    code, err = _export(capsys, "-o", str(folder), "--force")
    assert code == 1 and "a FIFO (named pipe)" in err and written[1].read_text() == "edited again"


def _export_of(titles: list[str], uid_prefix: str = "00000000") -> str:
    chats = [{"id": f"{uid_prefix}-0000-4000-8000-{i:012d}", "title": title, "created": 1.7e9 + i, "updated": 1.7e9 + i,
              "settings": {}, "folder": None, "pinned": False, "leaf": 1,
              "messages": [{"id": 1, "parent": None, "role": "user", "content": f"chat {i}", "reasoning": "",
                            "reasoning_closed": True, "state": "complete", "stats": None, "created": 1.7e9 + i}]}
             for i, title in enumerate(titles)]
    return json.dumps({"format": "tailor-chats", "version": 2, "chats": chats})


COLLIDING = [".", "..", "...", "a/b", "a-b", "A-B", "CON", "con.txt", "nul", "COM1", "lpt9", " . ", ""]


def test_a_folder_export_gives_every_chat_its_own_portable_file(tmp_path: Path, capsys):
    source = tmp_path / "chats.json"
    source.write_text(_export_of(COLLIDING), encoding="utf-8")
    db = tmp_path / "h.sqlite3"
    assert main(["import", str(source), "--db", str(db)]) == 0
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["export", "--all", "--format", "md", "--db", str(db), "-o", str(folder)]) == 0
    assert capsys.readouterr().err.endswith(f"Wrote {len(COLLIDING)} chat(s) to {folder}\n")
    names = [p.name for p in folder.iterdir()]
    assert len(names) == len(COLLIDING) and len({n.casefold() for n in names}) == len(COLLIDING)
    reserved = {"CON", "PRN", "AUX", "NUL"} | {f"{d}{i}" for d in ("COM", "LPT") for i in range(1, 10)}
    assert not [n for n in names if n.split(".")[0].strip().upper() in reserved or n in (".", "..")]
    texts = sorted(p.read_text() for p in folder.iterdir())
    assert all(f"chat {i}" in "".join(texts) for i in range(len(COLLIDING)))  # each chat's file is its own


def test_file_names_are_unique_where_case_is_ignored_and_never_a_device():
    assert portable("CON-0000.md") == "CON-0000.md" and portable("con.md") == "_con.md"
    assert portable("nul.tar.md") == "_nul.tar.md" and portable("COM10.md") == "COM10.md"


def test_import_of_a_fifo_or_proc_self_mem_is_one_line_at_once(tmp_path: Path):
    fifo = tmp_path / "conversations.json"
    os.mkfifo(fifo)
    db = tmp_path / "h.sqlite3"
    for path, reason in ((fifo, "it is a FIFO (named pipe), not a regular file"), (Path("/proc/self/mem"), "")):
        result = subprocess.run([TAILOR, "import", str(path), "--db", str(db)], capture_output=True, text=True,
                                timeout=60, env={**os.environ, "TAILOR_HOME": str(tmp_path / "home")})
        assert result.returncode == 1 and result.stdout == "", result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"tailor: error: Cannot read {path}: ") and reason in line, line
    assert not db.exists()  # a refused file makes no history


def _as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job inherits SIGINT ignored; a terminal's does not


def _chats_in(db: Path) -> list[tuple[str, int]]:
    """(title, messages) of each chat, read without disturbing the writer."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute("SELECT c.title, COUNT(m.id) FROM conversations c LEFT JOIN messages m "
                            "ON m.conversation_id = c.id GROUP BY c.id").fetchall()


def _started(db: Path) -> bool:
    try:
        return db.exists() and bool(_chats_in(db))
    except sqlite3.OperationalError:  # the file is there, its tables not yet
        return False


def test_ctrl_c_during_an_import_exits_130_with_whole_chats(tmp_path: Path):
    chats = [{"id": str(uuid.UUID(int=i + 1)), "title": f"Chat {i}", "created": 1.7e9, "updated": 1.7e9,
              "settings": {}, "folder": None, "pinned": False, "leaf": 20,
              "messages": [{"id": j + 1, "parent": j or None, "role": "user" if j % 2 == 0 else "assistant",
                            "content": "word " * 400, "reasoning": "", "reasoning_closed": True,
                            "state": "complete", "stats": None, "created": 1.7e9} for j in range(20)]}
             for i in range(3000)]
    source = tmp_path / "big.json"
    source.write_text(json.dumps({"format": "tailor-chats", "version": 2, "chats": chats}), encoding="utf-8")
    db = tmp_path / "h.sqlite3"
    process = subprocess.Popen([TAILOR, "import", str(source), "--db", str(db)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               preexec_fn=_as_in_a_terminal, env={**os.environ, "TAILOR_HOME": str(tmp_path)})
    try:
        deadline = time.monotonic() + 120
        while not _started(db):  # the import is under way: a chat is in
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130 and (out, err) == ("", "tailor: interrupted\n")
    saved = _chats_in(db)
    assert 0 < len(saved) < 3000 and {n for _, n in saved} == {20}  # every chat whole
    again = subprocess.run([TAILOR, "import", str(source), "--db", str(db)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "TAILOR_HOME": str(tmp_path)})
    assert again.returncode == 0 and f"; {len(saved)} already there" in again.stdout, again.stderr
    assert len(_chats_in(db)) == 3000


def test_ctrl_c_during_a_pull_exits_130_and_the_next_pull_resumes(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    repo = "org/Tiny-GGUF"
    fake_hub.add_repo(repo, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    name = "Tiny-Llama-Q8_0.gguf"
    size = tiny_quants["Q8_0"].stat().st_size
    fake_hub.fault(repo, name, stall_after=size // 2, stall_s=120)
    process = subprocess.Popen([TAILOR, "pull", repo, "--quant", "Q8_0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               preexec_fn=_as_in_a_terminal, env=dict(os.environ))
    hf_home = Path(os.environ["HF_HOME"])
    try:
        deadline = time.monotonic() + 120
        while not any(p.stat().st_size >= size // 2 for p in hf_home.rglob("*.incomplete")):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130 and out == "" and err.splitlines()[-1] == "tailor: interrupted", err
    (partial,) = hf_home.rglob("*.incomplete")
    assert partial.stat().st_size >= size // 2  # kept for the next pull
    fake_hub.clear_faults()
    sent = fake_hub.bytes_sent
    again = subprocess.run([TAILOR, "pull", repo, "--quant", "Q8_0"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ))
    assert again.returncode == 0, again.stderr
    assert Path(again.stdout.strip().splitlines()[-1]).read_bytes() == tiny_quants["Q8_0"].read_bytes()
    assert fake_hub.bytes_sent - sent <= size - size // 2 + 4096  # resumed: only the rest was sent


def test_a_history_path_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path):
    fifo = tmp_path / "chats.sqlite3"
    os.mkfifo(fifo)
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    source = tmp_path / "chats.json"
    source.write_text(_export_of(["One"]), encoding="utf-8")
    for db, kind in ((fifo, "a FIFO (named pipe)"), (device, "a character device")):
        for args in (("import", str(source)), ("chats", "ls"), ("export", "--all", "--format", "md")):
            result = subprocess.run([TAILOR, *args, "--db", str(db)], capture_output=True, text=True, timeout=60,
                                    env={**os.environ, "TAILOR_HOME": str(tmp_path / "home")})
            assert (result.returncode, result.stdout) == (1, ""), (args, result.stderr)
            assert result.stderr == (f"tailor: error: Cannot open the chat history {db}: it is {kind}, not a regular "
                                     "file\n"), args
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISCHR(device.lstat().st_mode)

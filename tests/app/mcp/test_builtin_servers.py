"""Tailor's own MCP servers (app/mcp/builtin) started as a user's Tailor starts them, through McpServers as
`python -m app.launcher mcp builtin ...` child processes, and called: the clock's times and zones, and the files
server's reads inside its folder and its refusals of everything outside it or not a regular file."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from app.mcp.builtin.folder import MAX_READ_BYTES
from app.mcp.builtin.launch import builtin_config, builtin_server
from app.mcp.servers import McpServers
from tests.app.mcp.helpers import call, started, tool

BIG_BYTES = 10 << 20


def _ready(name: str, config) -> McpServers:  # noqa: ANN001
    servers, statuses = started([config])
    status = statuses.wait(name, "ready", "failed")
    assert status.state == "ready", status
    return servers


@pytest.fixture(scope="module")
def clock():
    servers = _ready("clock", builtin_config("clock", builtin_server("clock"), timeout_s=20))
    yield lambda name, **arguments: call(servers, tool(servers, "clock", name), arguments)
    servers.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the files server reads, with every kind of thing it must refuse; a secret beside it."""
    base = tmp_path_factory.mktemp("builtin-files")
    (base / "secret.txt").write_text("the secret\n")
    root = base / "notes"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("Buy milk.\nCall Ana: 14:30 Lisbon.\n")
    (root / "sub" / "deep.md").write_text("# Deep\nnaïve café\n")
    (root / "big.txt").write_bytes(b"abcdefghij" * (BIG_BYTES // 10))
    (root / "picture.png").write_bytes(b"not really a png, refused by its name")
    (root / "blob.txt").write_bytes(b"text\0with a NUL")
    (root / "link-out.txt").symlink_to(base / "secret.txt")
    (root / "out").symlink_to(base, target_is_directory=True)
    (root / "link-in.txt").symlink_to(root / "notes.txt")
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "pipe")
        (root / "link-pipe").symlink_to(root / "pipe")
    return root


@pytest.fixture(scope="module")
def files(folder: Path):
    servers = _ready("files", builtin_config("files", builtin_server("files", str(folder)), timeout_s=20))
    yield lambda name, **arguments: call(servers, tool(servers, "files", name), arguments)
    servers.close()


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.split(" ")[0])


def test_the_clock_tells_the_time_in_the_zone_asked_and_here(clock):
    outcome = clock("current_time", timezone="Asia/Tokyo")
    assert outcome.ok, outcome
    moment = _moment(outcome.text)
    now = datetime.now(ZoneInfo("Asia/Tokyo"))
    assert abs((now - moment).total_seconds()) < 60 and moment.utcoffset() == now.utcoffset()
    assert outcome.text.endswith("; Asia/Tokyo, JST, UTC+09:00)")
    here = clock("current_time")
    assert here.ok and abs((datetime.now().astimezone() - _moment(here.text)).total_seconds()) < 60


def test_the_clock_converts_times_between_zones_with_summer_time(clock):
    winter = clock("convert_time", time="14:30", from_timezone="Europe/London", to_timezone="Asia/Kolkata",
                   date="2025-03-04")
    assert winter.text == ("14:30 in Europe/London is 20:00 in Asia/Kolkata (Tuesday 2025-03-04); "
                           "Asia/Kolkata is 5.5 hours ahead")
    summer = clock("convert_time", time="01:15", from_timezone="Europe/Berlin", to_timezone="America/New_York",
                   date="2025-07-01")
    assert summer.text == ("01:15 in Europe/Berlin is 19:15 in America/New_York (Monday 2025-06-30); "
                           "America/New_York is 6 hours behind")


def test_the_clock_names_a_zone_or_time_it_does_not_know(clock):
    for arguments, words in [
            ({"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
            ({"timezone": "../../etc/passwd"}, "unknown time zone '../../etc/passwd'")]:
        outcome = clock("current_time", **arguments)
        assert not outcome.ok and words in outcome.text, outcome
    bad_time = clock("convert_time", time="25:00", from_timezone="UTC", to_timezone="UTC")
    assert not bad_time.ok and "time must be HH:MM on a 24-hour clock, not '25:00'" in bad_time.text
    bad_zone = clock("convert_time", time="10:00", from_timezone="UTC", to_timezone="Atlantis")
    assert not bad_zone.ok and "unknown time zone 'Atlantis'" in bad_zone.text


def test_files_lists_and_reads_inside_its_folder(files, folder: Path):
    listed = files("list_files")
    assert listed.ok, listed
    lines = listed.text.splitlines()
    assert lines[:3] == ["big.txt  10,485,760 bytes", "blob.txt  15 bytes", "link-in.txt  (link)"]
    assert "notes.txt  34 bytes" in lines and "sub/" in lines and "out  (link)" in lines
    assert files("list_files", path="sub").text == "deep.md  20 bytes"
    assert files("read_file", path="notes.txt").text == "Buy milk.\nCall Ana: 14:30 Lisbon.\n"
    assert files("read_file", path="sub/deep.md").text == "# Deep\nnaïve café\n"
    assert files("read_file", path="link-in.txt").text.startswith("Buy milk.")  # a link that stays inside
    assert files("read_file", path=str(folder / "sub" / "deep.md")).ok  # an absolute path inside
    assert files("search_files", pattern="*.MD").text == "sub/deep.md"
    assert files("search_files", pattern="**/*.txt").text.splitlines() == [
        "big.txt", "blob.txt", "link-in.txt", "link-out.txt", "notes.txt"]


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "link-out.txt", "out/secret.txt"])
def test_files_refuses_every_way_out_of_its_folder(files, path: str):
    outcome = files("read_file", path=path)
    assert not outcome.ok and f"{path}: outside the folder this server reads" in outcome.text, outcome


def test_files_refuses_absolute_paths_outside_and_lists_nothing_outside(files, folder: Path):
    for path in (str(folder.parent / "secret.txt"), "/etc/passwd", "/dev/zero"):
        outcome = files("read_file", path=path)
        assert not outcome.ok and "outside the folder this server reads" in outcome.text, outcome
    for path in ("..", "out", "/"):
        assert not files("list_files", path=path).ok
    refused = files("search_files", pattern="../*")
    assert not refused.ok and "no '..'" in refused.text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_files_refuses_a_fifo_without_opening_it(files):
    for path in ("pipe", "link-pipe"):
        outcome = files("read_file", path=path, timeout=10)
        assert not outcome.ok and outcome.text.endswith(f"{path}: not a regular file (a FIFO); only files are read")
        assert outcome.seconds < 5  # refused, not blocked waiting for a writer
    assert "pipe  (not a regular file: a FIFO)" in files("list_files").text.splitlines()


def test_files_reads_a_big_file_a_capped_piece_at_a_time(files):
    first = files("read_file", path="big.txt")
    text, note = first.text.rsplit("\n", 1)
    assert len(text) == MAX_READ_BYTES and text.startswith("abcdefghij")
    assert note == f"[read bytes 0–61,440 of {BIG_BYTES:,}; read_file with offset=61440 reads on]"
    more = files("read_file", path="big.txt", offset=61440, length=10_000_000)  # asked for more: capped
    assert more.text.endswith(f"[read bytes 61,440–122,880 of {BIG_BYTES:,}; read_file with offset=122880 reads on]")
    end = files("read_file", path="big.txt", offset=BIG_BYTES - 5)
    assert end.text == "fghij"
    past = files("read_file", path="big.txt", offset=BIG_BYTES + 1)
    assert not past.ok and f"offset 10,485,761 is past its end ({BIG_BYTES:,} bytes)" in past.text


def test_files_never_cuts_a_character_in_two(files):
    cut = files("read_file", path="sub/deep.md", offset=0, length=10)  # "# Deep\nna" + half of "ï"
    assert cut.text.splitlines()[:2] == ["# Deep", "na"] and "offset=9 reads on" in cut.text
    rest = files("read_file", path="sub/deep.md", offset=10)  # starts inside "ï": that byte is skipped
    assert rest.text == "ve café\n"


def test_files_refuses_binary_files(files):
    png = files("read_file", path="picture.png")
    assert not png.ok and "picture.png: a binary file (.png); only text files are read" in png.text
    blob = files("read_file", path="blob.txt")
    assert not blob.ok and "blob.txt: a binary file (it holds NUL bytes)" in blob.text
    folder_read = files("read_file", path="sub")
    assert not folder_read.ok and "sub: a folder; list it with list_files" in folder_read.text
    missing = files("read_file", path="nope.txt")
    assert not missing.ok and "nope.txt: no such file or folder" in missing.text


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            info = os.lstat(Path(folder) / name)
            found[str(Path(folder, name).relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def test_files_never_writes(files, folder: Path):
    before, secret = _snapshot(folder), (folder.parent / "secret.txt").read_text()
    for name, arguments in [("list_files", {}), ("list_files", {"path": "sub"}), ("read_file", {"path": "notes.txt"}),
                            ("read_file", {"path": "big.txt", "offset": 5}), ("read_file", {"path": "../x"}),
                            ("search_files", {"pattern": "*"})]:
        files(name, **arguments)
    assert _snapshot(folder) == before and (folder.parent / "secret.txt").read_text() == secret


def test_a_files_server_whose_folder_is_gone_fails_saying_so(tmp_path: Path):
    config = builtin_config("files", builtin_server("files", str(tmp_path / "gone")))
    servers, statuses = started([config])
    try:
        status = statuses.wait("files", "ready", "failed")
    finally:
        servers.close()
    assert status.state == "failed" and re.search(r"gone is not a folder", status.stderr_tail), status

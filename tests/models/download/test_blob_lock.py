"""Two downloads of the same blob at once (the window and `tailor pull`): the second waits for the
first's lock and reuses its file, across real processes; nothing is fetched twice or lost."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from models.download.blob_lock import BlobLock, blob_lock_path, partial_lock_path
from models.download.downloader import Downloader
from models.download.records import clean_stale_partials
from models.download.request import DownloadFile, DownloadRequest, Progress
from tests.fixtures.fault_server import FaultServer
from tests.paths import REPO

ROOT = REPO
REPO = "org/locked-GGUF"
COMMIT = "e" * 40
SIZE = 4 << 20
WAITING = "waiting for another download of this file"

_CHILD = textwrap.dedent("""
    import json, sys
    from models.download.request import DownloadFile, DownloadRequest, Progress
    from models.download.downloader import Downloader
    cache, url, size, sha = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

    def on_event(event):
        if isinstance(event, Progress) and event.note:
            sys.stdout.write(f"NOTE {event.note}\\n")
            sys.stdout.flush()

    downloader = Downloader(cache, on_event=on_event, backoff_s=0.05, lock_poll_s=0.05)
    item = downloader.start(DownloadRequest("org/locked-GGUF", "e" * 40, (DownloadFile("model.gguf", url, size, sha, sha),)))
    try:
        item.result(timeout=120)
    except Exception as exc:
        print("ERROR", exc, flush=True)
        sys.exit(1)
    o = item.outcomes["model.gguf"]
    print("DONE", json.dumps({"fetched": o.fetched_bytes, "reused": o.reused, "waited": o.waited_for_lock}), flush=True)
""")

_HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from models.download.blob_lock import BlobLock
    lock = BlobLock(Path(sys.argv[1]))
    assert lock.acquire(lambda: False)
    print("HELD", flush=True)
    sys.stdin.readline()
""")


@pytest.fixture
def served_size() -> int:
    return SIZE


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _child(cache: Path, server: FaultServer, served: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(cache), server.url("/model.gguf"), str(SIZE),
                             _sha(served)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _line(process: subprocess.Popen[str]) -> str:
    line = process.stdout.readline().strip()
    assert line, f"the child ended: {process.stderr.read()}"
    return line


def _done(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, out + err
    (last,) = [line for line in out.splitlines() if line.startswith("DONE ")]
    return json.loads(last.removeprefix("DONE "))


def _blobs(cache: Path) -> Path:
    return cache / "models--org--locked-GGUF" / "blobs"


def test_the_second_process_waits_and_reuses_the_first_ones_file(tmp_path: Path, server: FaultServer, served: Path):
    server.faults.hold_after = SIZE // 4  # the first download holds there until released
    cache = tmp_path / "hub"
    first = _child(cache, server, served)
    assert server.holding.wait(60)
    second = _child(cache, server, served)
    assert _line(second) == f"NOTE {WAITING}"
    server.release.set()
    a, b = _done(first), _done(second)
    assert a == {"fetched": SIZE, "reused": False, "waited": False}
    assert b == {"fetched": 0, "reused": True, "waited": True}
    assert server.requests == [("/model.gguf", None)]  # one GET, from the first
    snapshot = cache / "models--org--locked-GGUF" / "snapshots" / COMMIT
    assert _sha(snapshot / "model.gguf") == _sha(served)
    assert [p.name for p in _blobs(cache).iterdir()] == [_sha(served)]  # no partial, no second blob


def test_when_the_first_process_dies_the_second_resumes_its_partial(tmp_path: Path, server: FaultServer,
                                                                    served: Path):
    server.faults.hold_after = SIZE // 4
    cache = tmp_path / "hub"
    first = _child(cache, server, served)
    assert server.holding.wait(60)
    second = _child(cache, server, served)
    assert _line(second) == f"NOTE {WAITING}"
    first.send_signal(signal.SIGKILL)  # the window crashes; its lock goes with it
    first.communicate(timeout=60)
    server.release.set()
    b = _done(second)
    assert b == {"fetched": SIZE - SIZE // 4, "reused": False, "waited": True}
    assert server.requests == [("/model.gguf", None), ("/model.gguf", f"bytes={SIZE // 4}-")]
    snapshot = cache / "models--org--locked-GGUF" / "snapshots" / COMMIT
    assert _sha(snapshot / "model.gguf") == _sha(served)
    assert not list(_blobs(cache).glob("*.incomplete"))


def test_two_downloaders_in_one_process_and_a_cancel_while_waiting(tmp_path: Path, server: FaultServer,
                                                                   served: Path):
    server.faults.hold_after = SIZE // 4
    cache = tmp_path / "hub"
    file = DownloadFile("model.gguf", server.url("/model.gguf"), SIZE, _sha(served), _sha(served))
    request = DownloadRequest(REPO, COMMIT, (file,))
    notes: list[str] = []
    window, pull = Downloader(cache), Downloader(cache, lock_poll_s=0.05, on_event=lambda e: notes.append(
        e.note) if isinstance(e, Progress) and e.note else None)
    first = window.start(request)
    assert server.holding.wait(60)
    waiting = pull.start(request)
    deadline = time.monotonic() + 60
    while not notes:
        assert time.monotonic() < deadline, "the second download never waited"
        time.sleep(0.01)
    assert notes == [WAITING]
    pull.cancel(waiting)
    assert waiting.wait(30) == "cancelled"
    partial = _blobs(cache) / f"{_sha(served)}.incomplete"
    assert partial.stat().st_size == SIZE // 4  # the other's partial is not the cancelled one's to remove
    server.release.set()
    snapshot = first.result(timeout=60)
    assert _sha(snapshot / "model.gguf") == _sha(served)
    again = pull.start(request)  # the blob is there now: reused without waiting or fetching
    again.result(timeout=60)
    assert again.outcomes["model.gguf"].fetched_bytes == 0 and len(server.requests) == 1


def test_stale_cleaning_leaves_a_locked_partial_alone(tmp_path: Path):
    cache = tmp_path / "hub"
    blob = "4" * 64
    partial = cache / "models--org--x" / "blobs" / f"{blob}.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"x" * 100)
    old = time.time() - 30 * 86400
    os.utime(partial, (old, old))
    lock = blob_lock_path(cache, "org/x", blob)
    assert partial_lock_path(partial) == lock == cache / ".locks" / "models--org--x" / f"{blob}.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "HELD"
        assert clean_stale_partials(cache) == [] and partial.exists()  # another process writes it
        assert not BlobLock(lock).try_acquire()
    finally:
        holder.communicate("\n", timeout=30)
    assert clean_stale_partials(cache) == [partial] and not partial.exists()

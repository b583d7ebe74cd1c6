"""Downloads over real loopback HTTP into a real cache folder, with real threads and real faults."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir, try_to_load_from_cache

from models.download.downloader import Downloader
from models.download.records import clean_stale_partials, load_pending, records_path
from models.download.request import DownloadError, DownloadFile, DownloadRequest, Progress, StateChanged
from tests.fixtures.fault_server import FaultServer, serve_faulty
from tests.paths import REPO as REPO_ROOT

COMMIT = "a" * 40
REPO = "org/model-GGUF"
MB = 1 << 20


def _bytes(n: int, seed: int) -> bytes:
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block * 64
    return bytes(out[:n])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    served = tmp_path / "served"
    served.mkdir()
    (served / "model.Q4_K_M.gguf").write_bytes(_bytes(4 * MB, 1))
    (served / "config.json").write_bytes(b'{"model_type": "llama"}\n')
    return {"/model.gguf": served / "model.Q4_K_M.gguf", "/config.json": served / "config.json"}


@pytest.fixture
def server(files: dict[str, Path]):
    with serve_faulty(files) as server:
        yield server


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "hf" / "hub"


def _lfs(server: FaultServer, files: dict[str, Path], name: str = "model.Q4_K_M.gguf") -> DownloadFile:
    data = files["/model.gguf"].read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    return DownloadFile(name, server.url("/model.gguf"), len(data), sha, f'"{sha}"')


def _small(server: FaultServer, files: dict[str, Path]) -> DownloadFile:
    data = files["/config.json"].read_bytes()
    git_sha1 = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return DownloadFile("config.json", server.url("/config.json"), len(data), None, git_sha1)


def _downloader(cache: Path, events: list | None = None, **kw) -> Downloader:
    kw.setdefault("stall_timeout_s", 5.0)
    kw.setdefault("backoff_s", 0.05)
    return Downloader(cache, on_event=events.append if events is not None else None, **kw)


def _wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _heard(events: list, state: str) -> None:
    """Until `events` holds the StateChanged to `state`. `result()` and `wait()` return once the state is
    set; the worker thread tells `on_event` just after, so the list may not have it yet when they return."""
    _wait_for(lambda: any(isinstance(e, StateChanged) and e.state == state for e in events))


def _size_of(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_two_files_land_in_the_hf_cache_layout(server, files, cache):
    events: list = []
    request = DownloadRequest(REPO, COMMIT, (_lfs(server, files), _small(server, files)), ref="main")
    snapshot = _downloader(cache, events).download(request)
    _heard(events, "done")

    assert snapshot == cache / "models--org--model-GGUF" / "snapshots" / COMMIT
    gguf = snapshot / "model.Q4_K_M.gguf"
    assert gguf.is_symlink() and not os.path.isabs(os.readlink(gguf))
    assert gguf.read_bytes() == files["/model.gguf"].read_bytes()
    assert (snapshot / "config.json").read_bytes() == files["/config.json"].read_bytes()
    assert (cache / "models--org--model-GGUF" / "refs" / "main").read_text() == COMMIT
    assert not list(cache.glob("**/*.incomplete"))
    # huggingface_hub sees them
    info = scan_cache_dir(cache)
    assert not info.warnings
    (repo,) = info.repos
    assert repo.repo_id == REPO and repo.size_on_disk == 4 * MB + files["/config.json"].stat().st_size
    assert {f.file_name for f in next(iter(repo.revisions)).files} == {"model.Q4_K_M.gguf", "config.json"}
    assert try_to_load_from_cache(REPO, "model.Q4_K_M.gguf", cache_dir=cache) == str(gguf)
    assert try_to_load_from_cache(REPO, "config.json", cache_dir=cache, revision=COMMIT) == str(
        snapshot / "config.json")
    # progress: per file and total, throttled, ending at the total
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress and progress[-1].done == progress[-1].total == request.total_bytes
    assert len(progress) < 50
    assert [e.state for e in events if isinstance(e, StateChanged)] == ["queued", "running", "done"]
    assert load_pending(cache) == []


def test_a_dropped_connection_resumes_with_range(server, files, cache):
    size = 4 * MB
    server.faults.drop_after = size // 2
    downloader = _downloader(cache)
    item = downloader.start(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    snapshot = item.result(timeout=30)

    assert (snapshot / "model.Q4_K_M.gguf").read_bytes() == files["/model.gguf"].read_bytes()
    assert server.drops == 1
    assert [r for _, r in server.requests] == [None, f"bytes={size // 2}-"]
    # What the client received over both answers (the server counts its last chunk after the client has it).
    assert item.outcomes["model.Q4_K_M.gguf"].fetched_bytes - size < size * 0.10
    assert item.outcomes["model.Q4_K_M.gguf"].attempts == 2


def test_a_stall_is_retried(server, files, cache):
    server.faults.stall_after, server.faults.stall_s = MB, 3.0
    item = _downloader(cache, stall_timeout_s=0.3).start(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    snapshot = item.result(timeout=30)
    assert (snapshot / "model.Q4_K_M.gguf").read_bytes() == files["/model.gguf"].read_bytes()
    assert server.stalls == 1 and server.requests[-1][1] == f"bytes={MB}-"


def test_corrupted_bytes_are_detected_and_the_file_removed(server, files, cache):
    server.faults.corrupt = True
    events: list = []
    item = _downloader(cache, events).start(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    with pytest.raises(DownloadError) as caught:
        item.result(timeout=30)
    assert caught.value.kind == "checksum"
    assert "model.Q4_K_M.gguf" in caught.value.message
    assert item.state == "failed"
    _heard(events, "failed")
    assert list((cache / "models--org--model-GGUF").rglob("*.*")) == []  # no blob, no partial
    assert not list((cache / "models--org--model-GGUF" / "blobs").iterdir())
    assert load_pending(cache) == []
    assert not (cache / "models--org--model-GGUF" / "snapshots" / COMMIT / "model.Q4_K_M.gguf").exists()
    assert events[-1].state == "failed" and events[-1].error.kind == "checksum"


def test_503_twice_is_retried(server, files, cache):
    server.faults.status, server.faults.status_times = 503, 2
    snapshot = _downloader(cache).download(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    assert (snapshot / "model.Q4_K_M.gguf").read_bytes() == files["/model.gguf"].read_bytes()
    assert server.failures == 2


def test_5xx_forever_gives_up_with_a_network_error(server, files, cache):
    server.faults.status, server.faults.status_times = 500, 100
    with pytest.raises(DownloadError) as caught:
        _downloader(cache, max_retries=2).download(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    assert caught.value.kind == "network" and "HTTP 500" in caught.value.message
    assert server.failures == 3


@pytest.mark.parametrize(("status", "kind"), [(404, "not_found"), (403, "gated"), (401, "gated")])
def test_not_found_and_gated(server, files, cache, status, kind):
    server.faults.status, server.faults.status_times = status, 100
    with pytest.raises(DownloadError) as caught:
        _downloader(cache).download(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    assert caught.value.kind == kind and server.failures == 1


def test_a_server_ignoring_range_restarts_from_zero(server, files, cache):
    size = 4 * MB
    server.faults.drop_after = size // 2
    server.ignore_range = True
    item = _downloader(cache).start(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    snapshot = item.result(timeout=30)
    assert (snapshot / "model.Q4_K_M.gguf").read_bytes() == files["/model.gguf"].read_bytes()
    assert server.requests[-1][1] == f"bytes={size // 2}-"  # asked to resume, got a 200
    assert item.outcomes["model.Q4_K_M.gguf"].restarted == 1


def _partial(cache: Path, files: dict[str, Path]) -> Path:
    sha = hashlib.sha256(files["/model.gguf"].read_bytes()).hexdigest()
    return cache / "models--org--model-GGUF" / "blobs" / f"{sha}.incomplete"


def test_pause_resume_and_cancel(server, files, cache):
    # Both answers stall far longer than the test waits: pause and cancel must cut a stall short.
    server.faults.stall_after, server.faults.stall_s, server.faults.stall_times = MB, 120.0, 2
    downloader = _downloader(cache, stall_timeout_s=300)
    request = DownloadRequest(REPO, COMMIT, (_lfs(server, files),))
    item = downloader.start(request)
    # The stall has begun once the client holds every byte sent before it (the server's stall
    # counter moves when the request arrives, before those bytes are sent).
    _wait_for(lambda: _size_of(_partial(cache, files)) == MB)
    downloader.pause(item)
    assert item.wait(60) == "paused"
    assert _partial(cache, files).stat().st_size == MB
    assert load_pending(cache) == [request]

    server.faults.stall_after = MB  # the resumed answer (from byte MB) stalls after 1 MB more
    downloader.resume(item)
    _wait_for(lambda: _size_of(_partial(cache, files)) == 2 * MB)
    downloader.cancel(item)
    assert item.wait(60) == "cancelled"
    assert item.error is not None and item.error.kind == "cancelled"
    assert not _partial(cache, files).exists()
    assert load_pending(cache) == []
    assert [r for _, r in server.requests] == [None, f"bytes={MB}-"]


def test_cancel_a_paused_download_removes_its_partial(server, files, cache):
    server.faults.drop_after, server.faults.drop_times = MB, 1
    downloader = _downloader(cache, backoff_s=30)  # stays in back-off after the drop
    item = downloader.start(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    _wait_for(lambda: server.drops == 1 and _partial(cache, files).exists())
    downloader.pause(item)
    assert item.wait(5) == "paused"
    downloader.cancel(item)
    assert item.state == "cancelled" and not _partial(cache, files).exists()


def test_a_new_downloader_resumes_after_the_app_closed(server, files, cache):
    server.faults.stall_after, server.faults.stall_s = 3 * MB, 120.0
    request = DownloadRequest(REPO, COMMIT, (_lfs(server, files), _small(server, files)), ref="main")
    first = _downloader(cache, stall_timeout_s=300)
    item = first.start(request)
    _wait_for(lambda: _size_of(_partial(cache, files)) == 3 * MB)  # the stall has begun
    first.close()
    assert item.state == "paused"

    second = _downloader(cache)
    assert second.pending_requests() == [request]
    resumed = second.start(second.pending_requests()[0])
    snapshot = resumed.result(timeout=60)
    assert (snapshot / "model.Q4_K_M.gguf").read_bytes() == files["/model.gguf"].read_bytes()
    assert [r for p, r in server.requests if p == "/model.gguf"] == [None, f"bytes={3 * MB}-"]
    # What the second downloader received: the missing megabyte and the small file, nothing more.
    fetched = {name: outcome.fetched_bytes for name, outcome in resumed.outcomes.items()}
    assert fetched == {"model.Q4_K_M.gguf": MB, "config.json": files["/config.json"].stat().st_size}
    assert second.pending_requests() == []


def test_a_cached_blob_is_not_fetched_again(server, files, cache):
    downloader = _downloader(cache)
    downloader.download(DownloadRequest(REPO, COMMIT, (_lfs(server, files),)))
    asked = len(server.requests)
    other = "b" * 40
    item = downloader.start(DownloadRequest(REPO, other, (_lfs(server, files),)))
    snapshot = item.result(timeout=30)
    assert (snapshot / "model.Q4_K_M.gguf").is_file()
    # Not one request, not one byte (requests are recorded before an answer is sent: no race).
    assert len(server.requests) == asked
    assert item.outcomes["model.Q4_K_M.gguf"].fetched_bytes == 0


@pytest.mark.parametrize("name", ["../../evil", "/etc/passwd", "a/../../evil", "sub\\..\\evil", "C:evil",
                                  "//server/share/x", "\\\\server\\share\\x", "", "a//b", "./x"])
def test_traversal_names_are_refused_before_any_byte(server, files, cache, tmp_path, name):
    good = _lfs(server, files)
    bad = DownloadFile(name, server.url("/config.json"), 10, None, "c" * 40)
    with pytest.raises(DownloadError) as caught:
        _downloader(cache).download(DownloadRequest(REPO, COMMIT, (good, bad)))
    assert caught.value.kind == "refused"
    assert server.requests == []
    assert not (tmp_path / "evil").exists() and not cache.exists()


@pytest.mark.parametrize("etag", ['"abc"', "z" * 40, "a" * 41, '"../' + "a" * 37 + '"', "a" * 63, ""])
def test_bad_etags_are_refused(server, files, cache, etag):
    bad = DownloadFile("config.json", server.url("/config.json"), 10, None, etag)
    with pytest.raises(DownloadError) as caught:
        _downloader(cache).download(DownloadRequest(REPO, COMMIT, (bad,)))
    assert caught.value.kind == "refused" and server.requests == [] and not cache.exists()


def test_weak_and_quoted_etags_are_accepted(server, files, cache):
    small = _small(server, files)
    weak = DownloadFile(small.path_in_repo, small.url, small.size, None, f'W/"{small.etag.upper()}"')
    snapshot = _downloader(cache).download(DownloadRequest(REPO, COMMIT, (weak,)))
    assert (cache / "models--org--model-GGUF" / "blobs" / small.etag).is_file()
    assert (snapshot / "config.json").is_file()


def test_not_enough_free_space_is_refused_before_fetching(server, files, cache):
    huge = DownloadFile("huge.gguf", server.url("/model.gguf"), 1 << 60, "d" * 64, "d" * 64)
    with pytest.raises(DownloadError) as caught:
        _downloader(cache).download(DownloadRequest(REPO, COMMIT, (huge,)))
    assert caught.value.kind == "disk_full" and "free" in caught.value.message
    assert server.requests == []


_CHILD = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from models.download.request import DownloadError, DownloadFile, DownloadRequest
    from models.download.downloader import Downloader
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    cache, url, size, sha = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    request = DownloadRequest("org/big", "e" * 40, (DownloadFile("big.gguf", url, size, sha, sha),))
    try:
        Downloader(cache, backoff_s=0.05).download(request)
    except DownloadError as exc:
        print(exc.kind, exc.message)
""")


def test_disk_full_is_a_clear_error_and_leaves_other_models_intact(server, files, cache):
    kept = _downloader(cache).download(DownloadRequest(REPO, COMMIT, (_small(server, files),)))
    lfs = _lfs(server, files)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(cache), lfs.url, str(lfs.size), lfs.sha256],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
    )
    assert out.stdout.strip() == "disk_full disk full while writing big.gguf", out.stderr
    big = cache / "models--org--big"
    assert not list(big.glob("blobs/*")) and not (big / "snapshots").exists()
    assert (kept / "config.json").read_bytes() == files["/config.json"].read_bytes()
    assert json.loads(records_path(cache).read_text()) == []


def test_stale_partials_are_cleaned(server, files, cache):
    blobs = cache / "models--org--x" / "blobs"
    blobs.mkdir(parents=True)
    old, fresh, foreign_old = blobs / ("1" * 40 + ".incomplete"), blobs / ("2" * 40 + ".incomplete"), \
        blobs / ("3" * 40 + ".incomplete")
    for path in (old, fresh, foreign_old):
        path.write_bytes(b"x" * 10)
    ten_days = time.time() - 10 * 86400
    os.utime(old, (ten_days, ten_days))
    os.utime(foreign_old, (time.time() - 2 * 86400,) * 2)
    # `fresh` belongs to a pending download (recorded), `foreign_old` to none
    from models.download.records import add_pending

    add_pending(cache, DownloadRequest("org/x", COMMIT, (DownloadFile("f", "http://x/f", 10, None, "2" * 40),)))
    removed = clean_stale_partials(cache, max_age_days=7)
    assert sorted(removed) == sorted([old, foreign_old])
    assert fresh.exists()

"""Downloads against servers that never stall but never finish, and hubs that say they are busy.

Real loopback servers and the real Downloader and HubClient; every limit is injected small so a
case takes seconds. Each test also checks that nothing was lost: the bytes a failed attempt brought
stay in the partial file, and the download resumes from them.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from models.download.downloader import Downloader
from models.download.http_fetch import RateFloor, retry_after_s
from models.download.records import load_pending
from models.download.request import DownloadError, DownloadFile, DownloadRequest
from models.hub.client import HubClient, HubError
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures.fake_hub import FakeHub
from tests.fixtures.fault_server import FaultServer, serve_faulty

fake_hub = hub_fixtures.fake_hub
COMMIT = "c" * 40
REPO = "org/slow-GGUF"
SIZE = 256 << 10
TAILOR = str(Path(sys.executable).with_name("tailor"))


def _file(server: FaultServer, served: Path) -> DownloadFile:
    sha = hashlib.sha256(served.read_bytes()).hexdigest()
    return DownloadFile("model.gguf", server.url("/model.gguf"), SIZE, sha, sha)


def _blobs(cache: Path) -> Path:
    return cache / "models--org--slow-GGUF" / "blobs"


def _downloader(cache: Path, **kw) -> Downloader:
    kw.setdefault("stall_timeout_s", 10.0)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return Downloader(cache, **kw)


# -- a drip: one byte at a time, never silent for long -------------------------------------------------


def test_a_drip_is_cut_retried_and_fails_clearly_keeping_its_bytes(tmp_path: Path, server: FaultServer,
                                                                   served: Path):
    server.faults.drip_after, server.faults.drip_interval_s, server.faults.drip_times = 1000, 0.02, 100
    cache = tmp_path / "hub"
    downloader = _downloader(cache, rate_floor=RateFloor(min_bps=1000, window_s=0.3), max_retries=2)
    request = DownloadRequest(REPO, COMMIT, (_file(server, served),))
    item = downloader.start(request)
    with pytest.raises(DownloadError) as caught:
        item.result(timeout=60)
    message = caught.value.message
    assert caught.value.kind == "network"
    assert message.startswith("giving up on model.gguf after 3 attempts: too slow: "), message
    assert "while fetching model.gguf (the floor is 1.0 KB/s)" in message
    # Nothing lost: what the drips brought is on disk, no blob was made, the download stays pending.
    (partial,) = _blobs(cache).iterdir()
    assert partial.name.endswith(".incomplete")
    kept = partial.stat().st_size
    assert 1000 < kept < SIZE and item.outcomes["model.gguf"].fetched_bytes == kept
    assert partial.read_bytes() == served.read_bytes()[:kept]
    assert load_pending(cache) == [request]
    ranges = [r for _, r in server.requests]
    assert ranges[0] is None and all(r and r.startswith("bytes=") for r in ranges[1:]) and len(ranges) == 3

    server.faults.drip_times = 0  # the server recovers
    downloader.resume(item)
    snapshot = item.result(timeout=60)
    assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
    assert server.requests[-1][1] == f"bytes={kept}-"  # resumed from the kept bytes, none fetched twice
    assert item.outcomes["model.gguf"].fetched_bytes == SIZE - kept
    assert not list(_blobs(cache).glob("*.incomplete")) and load_pending(cache) == []


def test_a_drip_that_passes_is_resumed_on_the_next_attempt(tmp_path: Path, server: FaultServer, served: Path):
    server.faults.drip_after, server.faults.drip_interval_s, server.faults.drip_times = 5000, 0.02, 1
    downloader = _downloader(tmp_path / "hub", rate_floor=RateFloor(min_bps=1000, window_s=0.3), max_retries=1)
    item = downloader.start(DownloadRequest(REPO, COMMIT, (_file(server, served),)))
    snapshot = item.result(timeout=60)
    assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
    outcome = item.outcomes["model.gguf"]
    assert outcome.attempts == 2 and outcome.fetched_bytes == SIZE  # no byte fetched twice
    (resumed_from,) = [r for _, r in server.requests if r]
    assert 5000 < int(resumed_from.removeprefix("bytes=").rstrip("-")) < SIZE


def test_a_slow_transfer_above_the_floor_is_left_alone(tmp_path: Path, server: FaultServer, served: Path):
    server.faults.drip_after, server.faults.drip_interval_s = SIZE - 300, 0.01  # ~100 B/s for ~3 s
    downloader = _downloader(tmp_path / "hub", rate_floor=RateFloor(min_bps=10, window_s=0.5), max_retries=0)
    item = downloader.start(DownloadRequest(REPO, COMMIT, (_file(server, served),)))
    snapshot = item.result(timeout=60)
    assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
    assert item.outcomes["model.gguf"].attempts == 1 and server.drips == 1


class _HeaderDrip:
    """A server that sends a status line, then one byte of a header every `interval` s, forever."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.threads: list[threading.Thread] = [threading.Thread(target=self._accept, daemon=True)]
        self.connections = 0
        self.threads[0].start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/model.gguf"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._drip, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                while not self.stop.wait(self.interval):
                    conn.sendall(b"a")
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for thread in self.threads:
            thread.join(5)


def test_headers_dripped_forever_fail_after_the_retries(tmp_path: Path):
    drip = _HeaderDrip()
    try:
        file = DownloadFile("model.gguf", drip.url, SIZE, "d" * 64, "d" * 64)
        downloader = _downloader(tmp_path / "hub", stall_timeout_s=0.5, max_retries=1)
        item = downloader.start(DownloadRequest(REPO, COMMIT, (file,)))
        with pytest.raises(DownloadError) as caught:
            item.result(timeout=30)
        assert caught.value.message == "giving up on model.gguf after 2 attempts: no answer from 127.0.0.1 within 0.5 s"
        assert drip.connections == 2
        assert not (_blobs(tmp_path / "hub") / ("d" * 64)).exists()
    finally:
        drip.close()


# -- busy servers: 503 and 429, with Retry-After ----------------------------------------------------------


def test_retry_after_is_waited_out(tmp_path: Path, server: FaultServer, served: Path):
    server.faults.status, server.faults.status_times, server.faults.retry_after = 503, 2, "1"
    downloader = _downloader(tmp_path / "hub", backoff_max_s=5.0)
    item = downloader.start(DownloadRequest(REPO, COMMIT, (_file(server, served),)))
    snapshot = item.result(timeout=60)
    assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
    delays = item.outcomes["model.gguf"].delays
    assert len(delays) == 2 and all(d >= 1.0 for d in delays)  # not the 0.01 s back-off


def test_a_429_with_a_date_and_a_long_retry_after_is_capped(tmp_path: Path, server: FaultServer, served: Path):
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    server.faults.status, server.faults.status_times, server.faults.retry_after = 429, 1, later
    downloader = _downloader(tmp_path / "hub", backoff_max_s=0.3)
    item = downloader.start(DownloadRequest(REPO, COMMIT, (_file(server, served),)))
    item.result(timeout=60)
    (delay,) = item.outcomes["model.gguf"].delays
    assert delay == 0.3  # an hour asked, the back-off's maximum waited


def test_retry_after_values():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert retry_after_s("120") == 120.0
    assert retry_after_s(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert retry_after_s(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now) == 0.0
    assert retry_after_s("soon") is None and retry_after_s(None) is None and retry_after_s("") is None


def _hub_repo(hub: FakeHub) -> None:
    hub.add_repo("org/Tiny-GGUF", {"tiny-Q4_K_M.gguf": b"GGUF" + bytes(5000), "README.md": b"# hi\n"}, tags=["gguf"])


def test_the_hub_busy_is_retried_with_back_off(fake_hub: FakeHub):
    _hub_repo(fake_hub)
    fake_hub.fault(fail_codes=[503, 503])
    waits: list[float] = []
    details = HubClient(backoff_s=0.1, sleep=waits.append).repo_details("org/Tiny-GGUF")
    assert details.file("tiny-Q4_K_M.gguf") is not None
    assert len(waits) == 2 and 0.08 <= waits[0] <= 0.12 and 0.16 <= waits[1] <= 0.24  # doubling, with jitter
    assert fake_hub.count_requests("GET", "/api/models/org/Tiny-GGUF/revision") == 3


def test_retry_after_from_the_hub_is_honoured(fake_hub: FakeHub):
    _hub_repo(fake_hub)
    fake_hub.fault(fail_codes=[429], retry_after="2")
    waits: list[float] = []
    HubClient(backoff_s=0.01, sleep=waits.append).repo_details("org/Tiny-GGUF")
    assert waits == [2.0]


def test_a_hub_busy_for_good_fails_with_one_clear_line(fake_hub: FakeHub):
    _hub_repo(fake_hub)
    fake_hub.fault(fail_codes=[503] * 20)
    waits: list[float] = []
    with pytest.raises(HubError) as caught:
        HubClient(retries=3, backoff_s=0.01, sleep=waits.append).repo_details("org/Tiny-GGUF")
    assert caught.value.kind == "network"
    assert caught.value.message == "org/Tiny-GGUF: the hub answered HTTP 503, 4 times in a row; try again later"
    assert len(waits) == 3


def test_what_a_retry_cannot_fix_is_not_retried(fake_hub: FakeHub):
    _hub_repo(fake_hub)
    waits: list[float] = []
    with pytest.raises(HubError) as caught:
        HubClient(backoff_s=0.01, sleep=waits.append).repo_details("org/No-Such-Repo")
    assert caught.value.kind == "not_found" and waits == []
    fake_hub.fault(fail_codes=[400])
    with pytest.raises(HubError):
        HubClient(backoff_s=0.01, sleep=waits.append).repo_details("org/Tiny-GGUF")
    assert waits == []


def test_tailor_pull_rides_out_a_busy_hub(fake_hub: FakeHub):
    _hub_repo(fake_hub)
    fake_hub.fault(fail_codes=[503])
    result = subprocess.run([TAILOR, "pull", "org/Tiny-GGUF", "--file", "tiny-Q4_K_M.gguf"], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    local = Path(result.stdout.strip().splitlines()[-1])
    assert local.read_bytes() == b"GGUF" + bytes(5000)
    assert fake_hub.faults.fail_codes == []  # the 503 was answered, and ridden out


# -- the fault server itself: no fault outlives its test ------------------------------------------------


def test_the_fault_servers_waits_end_when_it_stops(served: Path):
    """A stall, a drip and a hold far longer than the test, and a kept-alive idle connection: leaving
    the block ends them all, and every handler thread is done (server_close waits for them)."""
    clients = []
    with serve_faulty({"/model.gguf": served}) as server:
        for fault in ({"stall_after": 100, "stall_s": 3600.0}, {"drip_after": 100, "drip_interval_s": 3600.0},
                      {"hold_after": 100}):
            server.faults = server.faults.__class__(**fault)
            client = socket.create_connection(server.server_address, timeout=30)
            client.sendall(b"GET /model.gguf HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < 100:
                got += client.recv(65536)
            clients.append(client)
        server.faults = server.faults.__class__()
        idle = socket.create_connection(server.server_address, timeout=30)
        idle.sendall(b"GET /model.gguf HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n")
        got = b""
        while not got.endswith(served.read_bytes()[:10]):
            got += idle.recv(65536)
        clients.append(idle)  # answered; its handler now waits for a next request on it
    assert server._active == 0  # every handler returned: none sleeps on past the test
    for client in clients:
        client.settimeout(30)
        rest = b""
        while chunk := client.recv(65536):  # the server hung up on each
            rest += chunk
        client.close()

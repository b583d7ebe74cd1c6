"""models/download/small_fetch.py: a small file into memory under the download module's limits, against a
real HTTP server on loopback with its faults switched on (tests/fixtures/fault_server.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from models.download.request import DownloadError
from models.download.small_fetch import fetch_small
from tests.fixtures.fault_server import serve_faulty

SIZE = 200_000


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    path = tmp_path / "picture.png"
    path.write_bytes(bytes(range(256)) * (SIZE // 256) + bytes(SIZE % 256))
    return path


def test_the_body_comes_whole(blob: Path):
    with serve_faulty({"/p.png": blob}) as server:
        assert fetch_small(server.url("/p.png"), SIZE) == blob.read_bytes()


def test_a_declared_size_over_the_cap_is_refused_before_the_body(blob: Path):
    with serve_faulty({"/p.png": blob}) as server, pytest.raises(DownloadError, match="over the .* taken") as caught:
        fetch_small(server.url("/p.png"), SIZE - 1)
    assert caught.value.kind == "refused"


def test_an_answer_that_fails_is_named(blob: Path):
    with serve_faulty({"/p.png": blob}) as server:
        with pytest.raises(DownloadError, match="answered 404") as caught:
            fetch_small(server.url("/missing.png"), SIZE)
        assert caught.value.kind == "not_found"
        server.faults.status = 503
        with pytest.raises(DownloadError, match="answered 503"):
            fetch_small(server.url("/p.png"), SIZE)


def test_a_stalled_server_is_cut_after_the_stall_limit(blob: Path):
    with serve_faulty({"/p.png": blob}) as server:
        server.faults.stall_after, server.faults.stall_s = 1000, 30.0
        started = time.monotonic()
        with pytest.raises(DownloadError, match="sent nothing for 1 s") as caught:
            fetch_small(server.url("/p.png"), SIZE, stall_timeout_s=1.0)
        assert caught.value.kind == "network" and time.monotonic() - started < 20


def test_a_dripping_server_is_cut_at_the_deadline(blob: Path):
    with serve_faulty({"/p.png": blob}) as server:
        server.faults.drip_after, server.faults.drip_interval_s = 1000, 0.2
        started = time.monotonic()
        with pytest.raises(DownloadError, match="took over 2 s"):
            fetch_small(server.url("/p.png"), SIZE, stall_timeout_s=5.0, deadline_s=2.0)
        assert time.monotonic() - started < 20


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/p.png", "data:image/png;base64,AA=="])
def test_only_http_and_https_are_fetched(url: str):
    with pytest.raises(DownloadError, match="only http and https"):
        fetch_small(url, SIZE)


def test_nothing_listening_is_a_network_error(blob: Path):
    with serve_faulty({"/p.png": blob}) as server:
        url = server.url("/p.png")
    with pytest.raises(DownloadError, match="could not be reached") as caught:
        fetch_small(url, SIZE)
    assert caught.value.kind == "network"

"""Downloads and hub calls go through one HTTP stack: they honour HTTP(S)_PROXY and NO_PROXY (a real
proxy on 127.0.0.1 that counts what it carries) and the certificate store SSL_CERT_FILE names (a
local HTTPS server whose certificate a throw-away CA signed)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from models.download.downloader import Downloader
from models.download.request import DownloadError, DownloadFile, DownloadRequest
from models.hub.client import HubClient
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures.fake_hub import FakeHub
from tests.fixtures.fault_server import serve_faulty
from tests.fixtures.proxy_server import ProxyServer, serve_proxy
from tests.fixtures.tls_ca import LocalCa, make_ca, serve_tls

fake_hub = hub_fixtures.fake_hub
REPO = "org/net-GGUF"
COMMIT = "f" * 40
SIZE = 1 << 20
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
               "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.fixture
def served_size() -> int:
    return SIZE


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def proxy():
    with serve_proxy() as proxy:
        yield proxy


@pytest.fixture
def ca(tmp_path: Path) -> LocalCa:
    return make_ca(tmp_path / "ca")


def _file(url: str, served: Path) -> DownloadFile:
    sha = hashlib.sha256(served.read_bytes()).hexdigest()
    return DownloadFile("model.gguf", url, SIZE, sha, sha)


def _download(cache: Path, file: DownloadFile, **kw) -> Path:
    return Downloader(cache, backoff_s=0.01, max_retries=1, **kw).download(DownloadRequest(REPO, COMMIT, (file,)))


def test_http_downloads_go_through_http_proxy(tmp_path: Path, served: Path, proxy: ProxyServer,
                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with serve_faulty({"/model.gguf": served}) as server:
        url = server.url("/model.gguf")
        snapshot = _download(tmp_path / "hub", _file(url, served))
        assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
        assert proxy.requests == [("GET", url)]
        assert server.requests == [("/model.gguf", None)]


def test_no_proxy_is_honoured(tmp_path: Path, served: Path, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with serve_faulty({"/model.gguf": served}) as server:
        _download(tmp_path / "hub", _file(server.url("/model.gguf"), served))
    assert proxy.requests == []


def test_a_resume_through_the_proxy_keeps_its_range(tmp_path: Path, served: Path, proxy: ProxyServer,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with serve_faulty({"/model.gguf": served}) as server:
        server.faults.drop_after = SIZE // 2
        snapshot = _download(tmp_path / "hub", _file(server.url("/model.gguf"), served))
        assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
        assert [r for _, r in server.requests] == [None, f"bytes={SIZE // 2}-"]
    assert proxy.count("GET") == 2


def test_https_is_checked_against_the_store_ssl_cert_file_names(tmp_path: Path, served: Path, ca: LocalCa,
                                                                 monkeypatch: pytest.MonkeyPatch):
    with serve_tls({"/model.gguf": served}, ca) as server:
        file = _file(server.url("/model.gguf"), served)
        # The system store does not know this CA: a clear error, not retried, nothing kept.
        with pytest.raises(DownloadError) as caught:
            _download(tmp_path / "untrusted", file)
        assert caught.value.kind == "network"
        assert caught.value.message.startswith("the certificate of 127.0.0.1 is not trusted (")
        assert "SSL_CERT_FILE" in caught.value.message
        assert server.requests == []  # no request was sent over an unverified connection
        blobs = list((tmp_path / "untrusted").rglob("blobs/*"))
        assert all(p.name.endswith(".incomplete") and p.stat().st_size == 0 for p in blobs)

        monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))  # the store a company CA is put in
        snapshot = _download(tmp_path / "trusted", file)
        assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
        assert server.requests == [("/model.gguf", None)]


def test_https_through_a_connect_tunnel(tmp_path: Path, served: Path, ca: LocalCa, proxy: ProxyServer,
                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    with serve_tls({"/model.gguf": served}, ca) as server:
        snapshot = _download(tmp_path / "hub", _file(server.url("/model.gguf"), served))
        assert (snapshot / "model.gguf").read_bytes() == served.read_bytes()
        port = server.server_address[1]
    assert proxy.requests == [("CONNECT", f"127.0.0.1:{port}")]


def test_a_pause_wakes_a_stalled_tls_read(tmp_path: Path, served: Path, ca: LocalCa,
                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    with serve_tls({"/model.gguf": served}, ca) as server:
        server.faults.hold_after = SIZE // 4
        downloader = Downloader(tmp_path / "hub", stall_timeout_s=300)
        item = downloader.start(DownloadRequest(REPO, COMMIT, (_file(server.url("/model.gguf"), served),)))
        assert server.holding.wait(30)
        partial = tmp_path / "hub" / "models--org--net-GGUF" / "blobs" / f"{_file('', served).sha256}.incomplete"
        deadline = time.monotonic() + 30
        while not (partial.exists() and partial.stat().st_size == SIZE // 4):  # every byte sent is on disk
            assert time.monotonic() < deadline, "the bytes before the hold never arrived"
            time.sleep(0.01)
        downloader.pause(item)
        assert item.wait(30) == "paused"  # not after the 300 s stall timeout
        assert partial.read_bytes() == served.read_bytes()[: SIZE // 4]
        server.release.set()
        downloader.resume(item)
        assert (item.result(timeout=60) / "model.gguf").read_bytes() == served.read_bytes()
        assert server.requests[-1] == ("/model.gguf", f"bytes={SIZE // 4}-")


def test_hub_calls_use_the_same_proxy(fake_hub: FakeHub, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch):
    """The hub's API client and the downloader are one stack: a proxy that works for one works for both."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    from huggingface_hub.utils import _http as hf_http

    hf_http.close_session()  # the shared client reads the environment when it is made
    try:
        fake_hub.add_repo("org/Proxied-GGUF", {"m-Q4_K_M.gguf": b"GGUF" + bytes(3000)}, tags=["gguf"])
        client = HubClient()
        details = client.repo_details("org/Proxied-GGUF")
        f = details.file("m-Q4_K_M.gguf")
        file = DownloadFile(f.path, client.file_url("org/Proxied-GGUF", f.path, details.sha), f.size, f.sha256,
                            f.sha256)
        snapshot = Downloader(Path(os.environ["HF_HOME"]) / "hub").download(
            DownloadRequest("org/Proxied-GGUF", details.sha, (file,)))
        assert (snapshot / "m-Q4_K_M.gguf").read_bytes() == b"GGUF" + bytes(3000)
    finally:
        hf_http.close_session()
    targets = [t for _, t in proxy.requests]
    assert any("/api/models/org/Proxied-GGUF" in t for t in targets)  # the API call
    assert any("/resolve/" in t for t in targets) and any("/cdn/" in t for t in targets)  # the download, redirect

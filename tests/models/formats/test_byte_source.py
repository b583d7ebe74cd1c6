"""Byte sources: local files, HTTP Range requests, servers that ignore Range, and the starter model over HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from models.formats.byte_source import FileByteSource, HttpByteSource, open_byte_source
from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import read_gguf_header
from tests.fixtures.range_server import RangeServer, serve_files

MIB = 1 << 20


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    return path


@pytest.fixture
def server(blob: Path, starter_model: Path) -> Iterator[RangeServer]:
    with serve_files({"/blob.bin": blob, "/starter.gguf": starter_model}) as srv:
        yield srv


def test_file_source(blob: Path) -> None:
    with open_byte_source(blob) as source:
        assert isinstance(source, FileByteSource)
        assert source.size == MIB
        assert source.read(10, 4) == bytes([10, 11, 12, 13])
        assert source.read(MIB - 2, 10) == bytes([254, 255])
        assert source.read(MIB, 10) == b""
        assert source.bytes_fetched == 6


def test_http_range_requests(server: RangeServer, blob: Path) -> None:
    with open_byte_source(server.url("/blob.bin")) as source:
        assert isinstance(source, HttpByteSource)
        assert source.size is None
        assert source.read(1000, 3) == blob.read_bytes()[1000:1003]
        assert source.size == MIB  # learnt from Content-Range
        assert source.read(MIB - 2, 10) == bytes([254, 255])
        assert source.read(MIB + 5, 10) == b""  # past the end, now that the size is known: no request
        # What the client asked for and received. (The server's own byte count is not read: its
        # handler thread counts a chunk after writing it, possibly after the client has it.)
        assert source.bytes_fetched == 5
    assert server.requests == [("/blob.bin", "bytes=1000-1002"), ("/blob.bin", f"bytes={MIB - 2}-{MIB + 7}")]


def test_http_server_that_ignores_range_is_streamed_not_downloaded(server: RangeServer, blob: Path) -> None:
    server.ignore_range = True
    data = blob.read_bytes()
    with HttpByteSource(server.url("/blob.bin")) as source:
        assert source.read(100, 4) == data[100:104]
        assert source.size == MIB  # from Content-Length
        assert source.read(5000, 4) == data[5000:5004]  # further along the same stream
        assert source.read(10, 2) == data[10:12]  # going back reopens
        assert source.bytes_fetched < 5100 + 12
    assert len(server.requests) == 2


def test_http_errors_are_one_clear_message(server: RangeServer) -> None:
    with pytest.raises(InvalidModelFile, match="HTTP 404"):
        HttpByteSource(server.url("/missing.gguf")).read(0, 4)
    # A port that refuses connections: bound (so no one else can take it) but not listening,
    # for as long as the request runs; Linux answers a connection to it with a reset.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        with pytest.raises(InvalidModelFile, match=r"cannot be fetched \(.*refused"):
            HttpByteSource(f"http://127.0.0.1:{port}/x.gguf", timeout=2).read(0, 4)


def test_http_headers_are_sent(server: RangeServer) -> None:
    server.required_headers = {"Authorization": "Bearer hf_test"}
    with pytest.raises(InvalidModelFile, match="HTTP 401"):
        HttpByteSource(server.url("/blob.bin")).read(0, 4)
    source = HttpByteSource(server.url("/blob.bin"), headers={"Authorization": "Bearer hf_test"})
    assert source.read(0, 4) == bytes([0, 1, 2, 3])


def _requested_bytes(requests: list[tuple[str, str | None]], size: int) -> int:
    """Body bytes the Range headers of `requests` asked for, in a file of `size` bytes."""
    total = 0
    for _, header in requests:
        assert header is not None and header.startswith("bytes=")
        first, _, last = header.removeprefix("bytes=").partition("-")
        total += min(int(last), size - 1) - int(first) + 1
    return total


def test_starter_header_over_http_fetches_only_the_header(server: RangeServer, starter_model: Path) -> None:
    local = read_gguf_header(starter_model)
    size = starter_model.stat().st_size
    with HttpByteSource(server.url("/starter.gguf"), headers={"X-Test": "1"}) as source:
        remote = read_gguf_header(source)
    assert remote.source == server.url("/starter.gguf")
    assert (remote.metadata, remote.tensors, remote.data_offset) == (local.metadata, local.tensors, local.data_offset)
    assert remote.file_size == size
    # The header is 1.7 MiB (the vocabulary and merges); chunks of 1 MiB, then as much as fetched.
    assert len(server.requests) == 2
    assert local.data_offset < _requested_bytes(server.requests, size) <= local.data_offset + MIB
    assert source.bytes_fetched == _requested_bytes(server.requests, size)


def test_starter_header_from_a_server_that_ignores_range(server: RangeServer, starter_model: Path) -> None:
    server.ignore_range = True
    size = starter_model.stat().st_size
    source = HttpByteSource(server.url("/starter.gguf"))
    with source:
        header = read_gguf_header(source)
    assert header.n_layers == 30 and header.file_size == size
    assert source.bytes_fetched <= header.data_offset + MIB
    # What the server pushed into socket buffers before we hung up, counted once its handler
    # has stopped (a broken pipe): far from the whole 98 MB.
    server.wait_idle()
    assert server.bytes_sent < size // 4


def test_token_is_not_sent_to_another_origin_after_a_redirect():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from models.formats.byte_source import HttpByteSource

    seen: dict[str, str | None] = {}

    class Cdn(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen["cdn"] = self.headers.get("Authorization")
            body = b"GGUF" + bytes(60)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes 0-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # noqa: ANN002
            pass

    cdn = ThreadingHTTPServer(("127.0.0.1", 0), Cdn)

    class Hub(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen["hub"] = self.headers.get("Authorization")
            self.send_response(302)
            # "localhost" vs "127.0.0.1": another origin, as the hub's CDN is
            self.send_header("Location", f"http://localhost:{cdn.server_port}/blob")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):  # noqa: ANN002
            pass

    hub = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    for server in (cdn, hub):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        source = HttpByteSource(f"http://127.0.0.1:{hub.server_port}/r/resolve/main/m.gguf",
                                headers={"Authorization": "Bearer hf_secret"})
        assert source.read(0, 4) == b"GGUF"
    finally:
        hub.shutdown()
        cdn.shutdown()
    assert seen == {"hub": "Bearer hf_secret", "cdn": None}

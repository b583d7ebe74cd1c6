"""Connections that stall are closed, and a full server still serves: real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from app.server.runner import ServerThread

HALF_HEAD = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no blank line: the head never ends
# How long a test waits for something that must happen; far above the timeouts under test, so a
# loaded machine only makes the test slower, never red.
PATIENCE_S = 30.0


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def connect(server: ServerThread, sockets: list[socket.socket], data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S)
    sockets.append(sock)
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends before it closes; fails the test if it never closes."""
    sock.settimeout(PATIENCE_S)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def answer(raw: bytes) -> tuple[int, dict]:
    """(status, JSON body) of one HTTP response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def is_open(sock: socket.socket) -> bool:
    """True if the server has neither answered nor closed the connection (as far as it has yet)."""
    sock.settimeout(0.05)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


def test_half_sent_headers_are_answered_408_and_closed_after_the_timeout(
    start_server: Callable[..., ServerThread], sockets: list[socket.socket]
):
    server = start_server(header_timeout_s=0.5)
    started = time.monotonic()
    stalled = [connect(server, sockets, HALF_HEAD) for _ in range(5)]
    silent = connect(server, sockets)  # connects and never sends a byte
    for sock in stalled:
        status, body = answer(read_until_closed(sock))
        assert (status, body["error"]["code"]) == (408, "request_timeout")
    assert read_until_closed(silent) == b""  # closed without an answer: it never began a request
    assert time.monotonic() - started >= 0.45  # the deadline closed them, not something sooner


def test_a_stalled_second_request_on_a_kept_alive_connection_is_closed(
    start_server: Callable[..., ServerThread], sockets: list[socket.socket]
):
    server = start_server(header_timeout_s=0.5)
    sock = connect(server, sockets, HALF_HEAD + b"\r\n")
    sock.settimeout(PATIENCE_S)
    first = b""
    while b'"data"' not in first:  # the whole first answer (a JSON list of models)
        first += sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    sock.sendall(HALF_HEAD)
    status, body = answer(read_until_closed(sock))
    assert (status, body["error"]["code"]) == (408, "request_timeout")


def test_a_normal_request_succeeds_while_the_caps_worth_of_stalled_connections_are_held(
    start_server: Callable[..., ServerThread], sockets: list[socket.socket]
):
    server = start_server(max_connections=4, header_timeout_s=600)  # only the cap can free a slot here
    stalled = [connect(server, sockets, HALF_HEAD) for _ in range(4)]
    for _ in range(3):
        assert httpx.get(f"{server.url}/models", timeout=PATIENCE_S).status_code == 200
        # The newcomer closed the connection that had waited longest for its headers, and only it.
        status, body = answer(read_until_closed(stalled.pop(0)))
        assert (status, body["error"]["code"]) == (503, "too_many_connections")
        assert all(is_open(sock) for sock in stalled)
        stalled.append(connect(server, sockets, HALF_HEAD))  # the cap's worth held again


def test_when_every_connection_is_busy_a_newcomer_gets_503_at_once(
    start_server: Callable[..., ServerThread], sockets: list[socket.socket]
):
    server = start_server(max_connections=2, body_timeout_s=600)
    # Heads complete, bodies not: busy requests, not evictable. The 100 Continue (sent when the
    # server starts reading the body) shows the server has each request in hand.
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n")
    busy = [connect(server, sockets, head) for _ in range(2)]
    for sock in busy:
        assert sock.recv(100).startswith(b"HTTP/1.1 100")
    refused = httpx.get(f"{server.url}/models", timeout=PATIENCE_S)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "too_many_connections"
    busy[0].sendall(b"[]")  # one request ends (400: not an object), its slot is free again
    assert b"400" in busy[0].recv(100)
    assert httpx.get(f"{server.url}/models", timeout=PATIENCE_S).status_code == 200


def test_a_body_that_stops_arriving_is_408(start_server: Callable[..., ServerThread], sockets: list[socket.socket]):
    server = start_server(body_timeout_s=0.5)
    started = time.monotonic()
    sock = connect(server, sockets, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    b"Content-Length: 100\r\n\r\n{\"model\"")
    status, body = answer(read_until_closed(sock))
    assert (status, body["error"]["code"]) == (408, "request_timeout")
    assert time.monotonic() - started >= 0.45


def test_a_kept_alive_connection_answers_without_waiting_for_delayed_acks(server: ServerThread):
    # With Nagle's algorithm on, each response's body waited for the client's delayed ACK of its head:
    # 40 ms or more a request, from the second on (a connection's first ACKs are quick).
    with httpx.Client(base_url=server.url, timeout=PATIENCE_S) as client:
        took = []
        for _ in range(21):
            start = time.perf_counter()
            assert client.get("/models").status_code == 200
            took.append(time.perf_counter() - start)
    assert sorted(took)[10] < 0.02, f"median {sorted(took)[10] * 1000:.1f} ms"

"""Requests queue for the one engine, streams never mix, and a client that leaves frees the engine."""

from __future__ import annotations

import json
import socket
import threading
import time

import openai

from app.server.runner import ServerThread
from tests.app.server.conftest import FRANCE, MODEL, STORY, SYSTEM

ITALY = [SYSTEM, {"role": "user", "content": "What is the capital of Italy?"}]


def wait_until(condition, timeout: float = 60.0) -> None:
    """Poll a condition of the server's state (not a timing assertion: it fails only if it never holds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)


def streamed(client: openai.OpenAI, messages: list[dict], max_tokens: int = 32) -> tuple[str, set[str]]:
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0, stream=True
    )
    chunks = list(stream)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), {c.id for c in chunks}


def test_two_concurrent_clients_get_their_own_intact_streams(server: ServerThread, client: openai.OpenAI):
    expected = {
        "france": client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=32, temperature=0),
        "italy": client.chat.completions.create(model=MODEL, messages=ITALY, max_tokens=32, temperature=0),
    }
    results: dict[str, tuple[str, set[str]]] = {}
    second = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)

    def run(name: str, c: openai.OpenAI, messages: list[dict]) -> None:
        results[name] = streamed(c, messages)

    threads = [threading.Thread(target=run, args=("france", client, FRANCE)),
               threading.Thread(target=run, args=("italy", second, ITALY))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for name, reply in expected.items():
        text, ids = results[name]
        assert text == reply.choices[0].message.content  # every token, none of the other's
        assert len(ids) == 1
    assert results["france"][1] != results["italy"][1]
    assert "Paris" in results["france"][0] and "Rome" in results["italy"][0]


def test_client_leaving_mid_stream_cancels_its_reply(server: ServerThread, client: openai.OpenAI):
    stream = client.chat.completions.create(model=MODEL, messages=STORY, max_tokens=1500, temperature=0.7,
                                            stream=True)
    chunks = iter(stream)
    for _ in range(3):
        next(chunks)
    (request_id,) = server.engine.active
    stream.close()
    outcome = server.engine.wait_outcome(request_id, timeout=60)
    assert outcome is not None and outcome.finish_reason == "cancelled"
    assert outcome.gen_tokens < 1500
    # The engine is free: the next request is answered in full.
    after = client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=8, temperature=0)
    assert after.choices[0].finish_reason in ("stop", "length")


def test_client_leaving_a_plain_request_cancels_it(server: ServerThread):
    request_id = _leave_after_start(server, stream=False)
    outcome = server.engine.wait_outcome(request_id, timeout=60)
    assert outcome is not None and outcome.finish_reason == "cancelled"


def test_request_that_leaves_while_queued_never_reaches_the_engine(start_server):
    server = start_server(parallel=1)
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)
    stream = client.chat.completions.create(model=MODEL, messages=STORY, max_tokens=1500, stream=True)
    chunks = iter(stream)
    next(chunks)
    (running,) = server.engine.active
    queued = _raw_request(server, stream=True)
    wait_until(lambda: server.engine.waiting == 1)
    queued.close()
    wait_until(lambda: server.engine.waiting == 0)
    assert server.engine.active == [running]  # the first reply goes on, the second never started
    stream.close()
    assert server.engine.wait_outcome(running, timeout=60).finish_reason == "cancelled"
    started = [o.request_id for o in server.engine.outcomes]
    assert started[-1] == running
    after = client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=4, temperature=0)
    assert after.choices


def _raw_request(server: ServerThread, stream: bool) -> socket.socket:
    body = json.dumps({"model": MODEL, "max_tokens": 1500, "stream": stream,
                       "messages": [{"role": "user", "content": "Write a very long story about a dragon."}]})
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
    )
    return sock


def _leave_after_start(server: ServerThread, stream: bool) -> int:
    sock = _raw_request(server, stream)
    wait_until(lambda: bool(server.engine.active))
    (request_id,) = server.engine.active
    sock.close()
    return request_id

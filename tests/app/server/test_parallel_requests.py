"""`tailor serve --parallel N`: N streamed requests at once on the one model, the rest queue and get an
answer or a clear 503 once the queue timeout passes; nothing is left behind."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from app.server.config import ServerConfig
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from models.plan.load_options import SpeculativeOptions
from tests.app.server.conftest import MODEL, SYSTEM

# Each answered at length (24 tokens or more), so the four overlap by many steps: a one-line answer ("Paris.")
# ended before the fourth stream was prefilled, where steps are slow (OpenMP threads sleeping, tests/conftest.py).
QUESTIONS = ("Describe a sunny day at the beach.", "Name three colours and what each makes you think of.",
             "Why is the sky blue?", "Count to twenty in words.")


def ask(question: str) -> list[dict]:
    return [SYSTEM, {"role": "user", "content": question}]


def post(server: ServerThread, body: dict) -> tuple[int, dict]:
    """One chat completion over a connection of its own: (status, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def small_cache_server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A server over an engine of its own with a 256-cell cache: llama.cpp's attention for a single token
    splits a cache view of 512 cells or more over its threads, at boundaries that move with the view (where
    earlier conversations left cells), so only a view that stays under 512 makes alone and batched replies
    comparable token for token whatever ran before. No drafting: a question asked again would be drafted whole
    from its first answer (reply_memory.py) and end in a step or two, before the others begin."""
    engine = OwnEngine(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    engine.load(starter_model, LoadSettings(n_ctx=256, speculation=SpeculativeOptions("off")))
    with ServerThread(engine.client, engine.model_info, ServerConfig(port=0, parallel=4)) as server:
        yield server
    engine.shutdown()


def test_four_streams_at_once_are_each_what_they_are_alone(small_cache_server: ServerThread):
    server = small_cache_server
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)
    alone = {q: client.chat.completions.create(model=MODEL, messages=ask(q), max_tokens=24, temperature=0)
             .choices[0].message.content for q in QUESTIONS}
    spans: dict[str, tuple[float, float]] = {}
    texts: dict[str, str] = {}
    most_active = [0]

    def stream(question: str) -> None:
        chunks = client.chat.completions.create(model=MODEL, messages=ask(question), max_tokens=24,
                                                temperature=0, stream=True)
        pieces, first = [], None
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.monotonic()
                pieces.append(chunk.choices[0].delta.content)
                most_active[0] = max(most_active[0], len(server.engine.active))
        spans[question], texts[question] = (first, time.monotonic()), "".join(pieces)

    threads = [threading.Thread(target=stream, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert texts == alone
    assert most_active[0] >= 2
    # They streamed at the same time: every one began before any other ended
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())


def a_hundred_at_once(server: ServerThread, question: str, max_tokens: int) -> list[tuple[int, dict]]:
    """100 chat completions sent at once, each over its own connection: their (status, body)."""
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        outcome = post(server, {"model": MODEL, "messages": ask(question.format(i)), "max_tokens": max_tokens,
                                "temperature": 0})
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return results


def test_a_hundred_clients_on_four_slots_each_get_an_answer_or_a_clear_503(start_server):
    server = start_server(parallel=4, queue_timeout_s=1.0)
    results = a_hundred_at_once(server, "Tell me a story about the number {}.", max_tokens=64)
    assert len(results) == 100
    answered = [body for status, body in results if status == 200]
    busy = [body for status, body in results if status == 503]
    assert len(answered) + len(busy) == 100 and answered and busy
    assert all(b["choices"][0]["message"]["content"] for b in answered)
    for body in busy:
        assert body["error"]["code"] == "server_busy"
        assert body["error"]["message"].startswith("The server is busy:") and "Try again shortly." in body["error"]["message"]
    # Nothing is left running or waiting, and the next request is answered at once
    assert server.engine.active == [] and server.engine.waiting == 0
    status, body = post(server, {"model": MODEL, "messages": ask("Hi"), "max_tokens": 4, "temperature": 0})
    assert status == 200 and body["choices"][0]["finish_reason"] in ("stop", "length")


def test_a_hundred_clients_with_room_to_wait_are_all_answered(start_server):
    server = start_server(parallel=4, queue_timeout_s=600.0)  # room to wait, on a loaded machine too
    results = a_hundred_at_once(server, "Say {}.", max_tokens=4)
    assert [status for status, _ in results] == [200] * 100
    assert server.engine.active == [] and server.engine.waiting == 0

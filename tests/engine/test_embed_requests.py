"""Embedding requests through the real engine process: routed answers, batches between a reply's steps, cancel."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from engine.client import EngineClient
from engine.protocol import ChatMessage, Done, Embeddings, Error, Event, Loaded, SamplingParams, Token
from tests.engine.helpers import load

STORY = [ChatMessage("user", "Write a very long story about a dragon who learns to bake bread.")]


def events_until(inbox: queue.Queue[Event], ends: int, timeout: float = 120.0) -> list[Event]:
    """Events from `inbox` until `ends` requests have ended (each with Done, Error or Embeddings)."""
    out: list[Event] = []
    while ends:
        event = inbox.get(timeout=timeout)
        out.append(event)
        ends -= isinstance(event, Done | Error | Embeddings)
    return out


@pytest.fixture(scope="module")
def embed_engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory):
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.start()
    assert isinstance(load(client, str(starter_model)), Loaded)
    yield client
    client.shutdown()


def test_embeddings_go_to_their_own_handler(embed_engine: EngineClient):
    inbox: queue.Queue[Event] = queue.Queue()
    rid = embed_engine.embed(["The cat sat on the mat.", [1, 2, 3]], on_event=inbox.put)
    (answer,) = events_until(inbox, 1)
    assert isinstance(answer, Embeddings) and answer.request_id == rid
    assert len(answer.vectors) == 2 and answer.dim == 576 and answer.tokens[1] == 3


def test_a_reply_streams_between_the_batches_of_an_embedding(embed_engine: EngineClient):
    inbox: queue.Queue[Event] = queue.Queue()
    reply_id = embed_engine.generate(STORY, SamplingParams(temperature=0.0, max_tokens=24), on_event=inbox.put)
    embed_id = embed_engine.embed([f"Sentence number {i} of many." for i in range(120)], on_event=inbox.put)
    events = events_until(inbox, 2)
    done = next(e for e in events if isinstance(e, Done))
    answer = next(e for e in events if isinstance(e, Embeddings))
    assert done.request_id == reply_id and done.stats.gen_tokens == 24
    assert answer.request_id == embed_id and len(answer.vectors) == 120  # 2 batches of at most 512 tokens
    first_token = next(i for i, e in enumerate(events) if isinstance(e, Token))
    assert first_token < events.index(answer)  # the reply did not wait for the embedding to end


def test_a_cancel_ends_an_embedding_between_batches(embed_engine: EngineClient):
    inbox: queue.Queue[Event] = queue.Queue()
    rid = embed_engine.embed(["word " * 100] * 2000, on_event=inbox.put)  # 400 batches: minutes
    embed_engine.cancel(rid)
    (answer,) = events_until(inbox, 1, timeout=30)
    assert isinstance(answer, Error) and answer.kind == "cancelled" and answer.request_id == rid


def test_a_refused_input_is_an_error_naming_it(embed_engine: EngineClient):
    inbox: queue.Queue[Event] = queue.Queue()
    rid = embed_engine.embed(["fine", "word " * 600], on_event=inbox.put)
    (answer,) = events_until(inbox, 1)
    assert isinstance(answer, Error) and answer.kind == "context_overflow" and answer.request_id == rid
    assert answer.message.startswith("Input 1 is ")


def test_embedding_without_a_model_is_a_no_model_error(tmp_path: Path):
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    try:
        inbox: queue.Queue[Event] = queue.Queue()
        client.embed(["text"], on_event=inbox.put)
        (answer,) = events_until(inbox, 1, timeout=60)
        assert isinstance(answer, Error) and answer.kind == "no_model"
    finally:
        client.shutdown()

"""CountTokensRequest on the real engine: the prompt's tokens, rendered and tokenized as a reply's would be,
answered without decoding and without waiting for the replies running; and the stop string that ended a reply."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from engine.client import EngineClient
from engine.protocol import (
    ChatMessage,
    Done,
    Error,
    Event,
    Loaded,
    ReplyShape,
    SamplingParams,
    Token,
    TokenCount,
)
from tests.engine.helpers import load

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)
FRANCE = [ChatMessage("system", DEFAULT_SYSTEM_PROMPT), ChatMessage("user", "What is the capital of France?")]


class Answers:
    """The routed events of one request (on the reader thread), to wait on."""

    def __init__(self) -> None:
        self.events: queue.Queue[Event] = queue.Queue()
        self.ended = threading.Event()

    def __call__(self, event: Event) -> None:
        self.events.put(event)
        if isinstance(event, Done | Error | TokenCount):
            self.ended.set()

    def last(self, timeout: float = 60.0) -> Event:
        assert self.ended.wait(timeout)
        *_, event = list(self.events.queue)
        return event


@pytest.fixture(scope="module")
def engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory):
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.start()
    assert isinstance(load(client, str(starter_model)), Loaded)
    yield client
    client.shutdown()


def count(engine: EngineClient, messages: list[ChatMessage], shape: ReplyShape | None = None) -> int:
    answers = Answers()
    request_id = engine.count_tokens(messages, shape, on_event=answers)
    answer = answers.last()
    assert isinstance(answer, TokenCount) and answer.request_id == request_id, answer
    return answer.tokens


def test_the_count_is_the_prompt_a_reply_prefills(engine: EngineClient):
    answers = Answers()
    engine.generate(FRANCE, GREEDY, on_event=answers)
    done = answers.last()
    assert isinstance(done, Done)
    assert count(engine, FRANCE) == done.stats.prompt_tokens
    longer = [*FRANCE, ChatMessage("assistant", "Paris."), ChatMessage("user", "And of Italy?")]
    assert count(engine, longer) > done.stats.prompt_tokens


def test_a_count_does_not_wait_for_the_reply_running(engine: EngineClient):
    reply = Answers()
    request_id = engine.generate([ChatMessage("user", "Count from 1 to 10000.")],
                                 SamplingParams(temperature=0.0, max_tokens=100_000), on_event=reply)
    try:
        while not any(isinstance(e, Token) for e in list(reply.events.queue)):  # it is streaming
            assert not reply.ended.wait(0.01)
        assert count(engine, FRANCE) > 10
        assert not reply.ended.is_set()  # counted while the reply still ran
    finally:
        engine.cancel(request_id)
    assert isinstance(reply.last(), Done)


def test_a_prompt_a_reply_would_refuse_is_refused_alike(engine: EngineClient):
    tools = '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]'
    answers = Answers()
    engine.count_tokens([ChatMessage("user", "Hi")], ReplyShape(tools=tools), on_event=answers)
    error = answers.last()
    assert isinstance(error, Error) and error.kind == "bad_request" and "tool support" in error.message


def test_the_stop_string_that_ended_a_reply_is_named(engine: EngineClient):
    answers = Answers()
    engine.generate(FRANCE, SamplingParams(temperature=0.0, max_tokens=40, stop=("Zzz", "Paris")), on_event=answers)
    done = answers.last()
    assert isinstance(done, Done)
    assert done.finish_reason == "stop" and done.stop_string == "Paris" and "Paris" not in done.text
    answers = Answers()
    engine.generate(FRANCE, SamplingParams(temperature=0.0, max_tokens=40), on_event=answers)
    assert answers.last().stop_string is None


def test_a_count_without_a_model_is_a_no_model_error(tmp_path: Path):
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    try:
        answers = Answers()
        client.count_tokens(FRANCE, on_event=answers)
        error = answers.last()
        assert isinstance(error, Error) and error.kind == "no_model"
    finally:
        client.shutdown()

"""Routed replies and raw prompts on the real engine: one EngineClient shared by two users."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.services.chat_defaults import DEFAULT_SYSTEM_PROMPT
from engine.client import EngineClient
from engine.protocol import ChatMessage, Done, Error, Event, Loaded, SamplingParams, Token
from tests.engine.helpers import collect, load

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)
FRANCE = [ChatMessage("system", DEFAULT_SYSTEM_PROMPT), ChatMessage("user", "What is the capital of France?")]


class Routed:
    """Collects one routed reply's events (on the reader thread)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.ended = threading.Event()

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, Done | Error):
            self.ended.set()

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, Token))


@pytest.fixture(scope="module")
def engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory):
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.start()
    assert isinstance(load(client, str(starter_model)), Loaded)
    yield client
    client.shutdown()


def test_routed_and_default_replies_never_see_each_other(engine: EngineClient):
    routed = Routed()
    routed_id = engine.generate(FRANCE, GREEDY, on_event=routed)
    default_id = engine.generate(FRANCE, GREEDY)
    reply = collect(engine, default_id)  # the default queue: only its own reply (and memory)
    assert routed.ended.wait(60)
    assert isinstance(reply.end, Done) and isinstance(routed.events[-1], Done)
    assert {e.request_id for e in routed.events} == {routed_id}
    assert routed.text == routed.events[-1].text == reply.text  # same greedy reply, kept apart
    assert "Paris" in routed.text


def test_raw_prompt_is_continued_without_the_template(engine: EngineClient):
    routed = Routed()
    engine.generate((), GREEDY, prompt="The capital of France is", on_event=routed)
    assert routed.ended.wait(60)
    done = routed.events[-1]
    assert isinstance(done, Done), done
    # No chat template: the prompt is only the text's own tokens (plus BOS), a handful.
    assert done.stats.prompt_tokens < 10
    assert done.text.strip()


def test_shutdown_ends_routed_replies_that_were_still_open(starter_model: Path, tmp_path: Path):
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    assert isinstance(load(client, str(starter_model)), Loaded)
    routed = Routed()
    long = SamplingParams(temperature=0.0, max_tokens=100_000)
    client.generate([ChatMessage("user", "Count from 1 to 10000.")], long, on_event=routed)
    deadline = time.monotonic() + 60
    while not any(isinstance(e, Token) for e in routed.events):  # it is streaming
        assert time.monotonic() < deadline and not routed.ended.wait(0.01)
    process = client._process
    client.shutdown()
    assert routed.ended.is_set()
    # The engine cancelled the reply it was running and exited by itself (not killed after the timeout)
    end = routed.events[-1]
    assert isinstance(end, Done) and end.finish_reason == "cancelled"
    assert process.exitcode == 0


def test_two_replies_on_one_engine_run_at_once_and_a_load_waits_for_them(engine: EngineClient,
                                                                        starter_model: Path):
    """The window's chat and a server's request share the engine: both stream in the same steps."""
    alone = Routed()
    engine.generate(FRANCE, GREEDY, on_event=alone)
    assert alone.ended.wait(60)
    first, second, order = Routed(), Routed(), []

    def into(reply: Routed, name: str):
        def on_event(event: Event) -> None:
            order.append((name, type(event).__name__))
            reply(event)
        return on_event

    long = SamplingParams(temperature=0.0, max_tokens=200, seed=1)
    engine.generate([ChatMessage("user", "Count from 1 to 100, one number a line.")], long,
                    on_event=into(first, "first"))
    engine.generate(FRANCE, GREEDY, on_event=into(second, "second"))
    assert second.ended.wait(60) and first.ended.wait(60)
    assert second.text == alone.text  # batched beside the other, what it is alone
    # The second request's tokens came while the first was still streaming, not after it
    first_done = order.index(("first", "Done"))
    assert ("second", "Done") in order[:first_done]
    assert isinstance(load(engine, str(starter_model)), Loaded)

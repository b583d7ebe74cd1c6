"""Several replies at once on the PyTorch backend (`tailor serve --parallel` with a model folder): each is
what it is alone, token for token; a cancel ends only its reply; a reply sent while others run joins their
batch. On a real tiny model folder, in this process and through the engine process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine.backend import BackendError, run_alone
from engine.client import EngineClient
from engine.protocol import (
    ChatMessage,
    Done,
    Error,
    GenerateRequest,
    Loaded,
    LoadRequest,
    SamplingParams,
    Token,
)
from engine.torch.backend import TorchBackend
from tests.fixtures.tiny_hf import write_tiny_model

GREEDY = SamplingParams(temperature=0.0, max_tokens=60)
# The tiny model's greedy replies: three run to max_tokens, the third ends early (end of generation),
# so a reply leaves the batch while others go on.
QUESTIONS = ("Hello, how are you today?", "The quick brown fox jumps over the lazy dog.",
             "Tailor runs language models.", "I am fine, thank you.")


def chat(i: int) -> tuple[ChatMessage, ...]:
    return (ChatMessage("user", QUESTIONS[i]),)


@dataclass
class Streamed:
    """One reply's streamed text and its end, in the test's own process."""

    pieces: list[str] = field(default_factory=list)
    end: Done | BackendError | None = None

    def emit(self, text: str, reasoning: bool = False) -> None:
        self.pieces.append(text)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-parallel")
    write_tiny_model(directory, "qwen2")
    return directory


def loaded(model_dir: Path, parallel: int = 4, speculative_tokens: int = 0) -> TorchBackend:
    backend = TorchBackend(device="cpu", speculative_tokens=speculative_tokens)
    backend.load(LoadRequest(str(model_dir), n_ctx=512, n_parallel=parallel))
    return backend


def alone(model_dir: Path, requests: list[GenerateRequest]) -> list[Done]:
    """Each request on a fresh backend of its own, one at a time: the ground truth."""
    return [run_alone(loaded(model_dir), r, lambda _t, reasoning=False: None, lambda: False) for r in requests]


def step_until_ended(backend: TorchBackend, replies: dict[int, Streamed], batches: list[tuple[int, ...]]) -> None:
    """Step until every reply ended, noting the sequences of each engine step."""
    assert backend.session is not None
    while any(s.end is None for s in replies.values()):
        for rid, outcome in backend.step():
            assert replies[rid].end is None
            replies[rid].end = outcome
        batches.append(backend.session.engine.last_batch)


def submit(backend: TorchBackend, request: GenerateRequest, cancelled: Callable[[], bool] = lambda: False) -> Streamed:
    streamed = Streamed()
    backend.submit(request, streamed.emit, cancelled)
    return streamed


@pytest.mark.parametrize("k", [0, 4], ids=["plain", "prompt-lookup"])
def test_concurrent_greedy_replies_are_each_what_they_are_alone(model_dir: Path, k: int) -> None:
    requests = [GenerateRequest(i + 1, chat(i), GREEDY) for i in range(4)]
    expected = alone(model_dir, requests)
    backend = loaded(model_dir, speculative_tokens=k)
    replies = {r.request_id: submit(backend, r) for r in requests}
    assert backend.free_slots == 0
    batches: list[tuple[int, ...]] = []
    step_until_ended(backend, replies, batches)
    texts = {rid: s.end.text for rid, s in replies.items() if isinstance(s.end, Done)}
    assert texts == {r.request_id: d.text for r, d in zip(requests, expected, strict=True)}
    assert all("".join(s.pieces) == texts[rid] for rid, s in replies.items())
    assert [replies[r.request_id].end.finish_reason for r in requests] == [d.finish_reason for d in expected]
    assert expected[2].finish_reason == "stop" and expected[0].finish_reason == "length"
    # All four were decoded together, in one engine step.
    assert max(len(b) for b in batches) == 4
    assert (replies[1].end.stats.draft_acceptance is None) == (k == 0)
    assert backend.free_slots == 4 and backend.memory().kv_tokens_used == 0


def test_seeded_sampling_is_the_same_beside_other_replies(model_dir: Path) -> None:
    """A seeded reply draws each token from its own seed and position: what runs beside it changes nothing."""
    seeded = [SamplingParams(temperature=1.0, top_p=0.9, top_k=50, max_tokens=30, seed=s) for s in (7, 8, 9)]
    requests = [GenerateRequest(i + 1, chat(i), s) for i, s in enumerate(seeded)]
    expected = alone(model_dir, requests)
    backend = loaded(model_dir)
    replies = {r.request_id: submit(backend, r) for r in requests}
    step_until_ended(backend, replies, [])
    assert [replies[r.request_id].end.text for r in requests] == [d.text for d in expected]


def test_cancelling_one_reply_stops_only_it(model_dir: Path) -> None:
    long = SamplingParams(temperature=0.0, max_tokens=200)
    requests = [GenerateRequest(i + 1, chat(i), long) for i in (0, 1, 3)]
    expected = alone(model_dir, requests)
    backend = loaded(model_dir)
    replies: dict[int, Streamed] = {}
    for r in requests:
        if r.request_id == 2:  # cancelled once its first text streamed
            replies[2] = submit(backend, r, lambda: len(replies[2].pieces) >= 1)
        else:
            replies[r.request_id] = submit(backend, r)
    step_until_ended(backend, replies, [])
    cancelled = replies[2].end
    assert isinstance(cancelled, Done) and cancelled.finish_reason == "cancelled"
    assert 1 <= cancelled.stats.gen_tokens < 200 and expected[1].stats.gen_tokens == 200
    assert cancelled.text == "".join(replies[2].pieces)
    for r, d in zip(requests, expected, strict=True):
        if r.request_id != 2:
            assert replies[r.request_id].end.text == d.text and replies[r.request_id].end.finish_reason == "length"
    assert backend.memory().kv_tokens_used == 0


def test_a_reply_submitted_while_another_runs_joins_its_batch(model_dir: Path) -> None:
    first, second = GenerateRequest(1, chat(0), GREEDY), GenerateRequest(2, chat(1), GREEDY)
    expected = alone(model_dir, [first, second])
    backend = loaded(model_dir, parallel=2)
    assert backend.session is not None
    engine = backend.session.engine
    replies = {1: submit(backend, first)}
    while len(replies[1].pieces) < 5:  # the first reply is decoding
        assert backend.step() == []
    (first_seq,) = engine.last_batch
    replies[2] = submit(backend, second)
    assert backend.free_slots == 0
    with pytest.raises(BackendError) as busy:
        backend.submit(GenerateRequest(3, chat(3), GREEDY), lambda _t: None, lambda: False)
    assert busy.value.kind == "busy"
    assert backend.step() == []
    # The step after the second came decoded the first and prefilled the second, together.
    assert len(engine.last_batch) == 2 and engine.last_batch[0] == first_seq
    batches: list[tuple[int, ...]] = []
    step_until_ended(backend, replies, batches)
    assert [replies[1].end.text, replies[2].end.text] == [d.text for d in expected]
    assert sum(len(b) == 2 for b in batches) >= 10  # and decoded them together from then on


def test_a_stop_string_ends_its_reply_while_the_others_go_on(model_dir: Path) -> None:
    plain = alone(model_dir, [GenerateRequest(1, chat(0), GREEDY)])[0]
    stop = plain.text[10:14]
    assert stop and plain.text.find(stop) == 10
    requests = [GenerateRequest(1, chat(0), SamplingParams(temperature=0.0, max_tokens=60, stop=(stop,))),
                GenerateRequest(2, chat(1), GREEDY)]
    other = alone(model_dir, requests[1:])[0]
    backend = loaded(model_dir)
    replies = {r.request_id: submit(backend, r) for r in requests}
    step_until_ended(backend, replies, [])
    assert replies[1].end.text == plain.text[:10] and replies[1].end.finish_reason == "stop"
    assert replies[2].end.text == other.text


def collect_all(client: EngineClient, ids: list[int], timeout: float = 120.0) -> list[Token | Done | Error]:
    """The events of replies `ids`, in the order they came, until every one ended."""
    events: list[Token | Done | Error] = []
    open_ids = set(ids)
    while open_ids:
        event = client.next_event(timeout=timeout)
        assert event is not None, f"replies {open_ids} did not end within {timeout}s"
        if isinstance(event, Error):
            raise AssertionError(f"engine error: {event}")
        if isinstance(event, Token | Done) and event.request_id in open_ids:
            events.append(event)
            if isinstance(event, Done):
                open_ids.discard(event.request_id)
    return events


def text_of(events: list[Token | Done | Error], rid: int) -> str:
    return "".join(e.text for e in events if isinstance(e, Token) and e.request_id == rid)


def test_the_engine_process_batches_a_model_folder(model_dir: Path, tmp_path: Path) -> None:
    """Through EngineClient, loaded with n_parallel 2: two replies stream at once (the second's text comes
    before the first ends), a third waits for a free slot, and each is what it is alone."""
    long = SamplingParams(temperature=0.0, max_tokens=300)
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    try:
        client.load(LoadRequest(str(model_dir), n_ctx=512, n_parallel=2))
        while not isinstance(event := client.next_event(timeout=120), Loaded):
            assert event is not None and not isinstance(event, Error), event
        alone_texts = [collect_all(client, [client.generate(chat(i), long)])[-1].text for i in (0, 1, 3)]
        first = client.generate(chat(0), long)
        second, third = client.generate(chat(1), long), client.generate(chat(3), long)
        events = collect_all(client, [first, second, third])
    finally:
        client.shutdown()
    order = [(type(e).__name__, e.request_id) for e in events]
    assert order.index(("Token", second)) < order.index(("Done", first))
    # Two slots: the third starts once one of the first two has ended.
    assert order.index(("Token", third)) > min(order.index(("Done", first)), order.index(("Done", second)))
    done = {e.request_id: e for e in events if isinstance(e, Done)}
    assert [done[r].text for r in (first, second, third)] == alone_texts
    assert [text_of(events, r) for r in (first, second, third)] == alone_texts

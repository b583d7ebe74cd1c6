"""Several replies on one loaded GGUF model (engine/gguf/reply_batch.py), on the real starter model:
batched together, each gives what it gives alone; new prompts join running replies; a cancel or a
full cache ends one reply and the others go on."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from engine.backend import BackendError
from engine.gguf.backend import GgufBackend
from engine.gguf.llama_batch import BatchRow
from engine.gguf.reply_batch import RunningReply
from engine.protocol import ChatMessage, Done, GenerateRequest, LoadRequest, SamplingParams
from models.plan.load_options import SpeculativeOptions

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)
QUESTIONS = ("What is the capital of France?", "Name three colours.", "Why is the sky blue?", "Count to five.")


def chat(question: str, system: str = "You are a helpful assistant.") -> tuple[ChatMessage, ...]:
    return (ChatMessage("system", system), ChatMessage("user", question))


class Run:
    """Replies submitted to one backend, stepped together; each one's text and its Done (or error)."""

    def __init__(self, backend: GgufBackend):
        self.backend = backend
        self.texts: dict[int, list[str]] = {}
        self.ends: dict[int, Done | BackendError] = {}
        self.cancelled: set[int] = set()
        self.widest = 0  # the most replies running in one step
        self.replies: dict[int, RunningReply] = {}  # the engine's own record of each (its tokens)
        self._next_id = 1

    def submit(self, messages: tuple[ChatMessage, ...], sampling: SamplingParams = GREEDY) -> int:
        rid = self._next_id
        self._next_id += 1
        self.texts[rid] = []
        self.backend.submit(GenerateRequest(rid, messages, sampling), self.texts[rid].append,
                            lambda: rid in self.cancelled)
        self.replies[rid] = self.backend._batch.running[-1]
        return rid

    def step(self) -> None:
        self.widest = max(self.widest, self.backend.running)
        for rid, outcome in self.backend.step():
            self.ends[rid] = outcome

    def until_done(self, limit: int = 2000) -> None:
        for _ in range(limit):
            if not self.backend.running:
                return
            self.step()
        raise AssertionError("the replies did not end")

    def text(self, rid: int) -> str:
        return "".join(self.texts[rid])


def alone(backend: GgufBackend, messages: tuple[ChatMessage, ...], sampling: SamplingParams = GREEDY) -> Done:
    return backend.generate(GenerateRequest(99, messages, sampling), lambda _t: None, lambda: False)


def tokens_alone(backend: GgufBackend, messages: tuple[ChatMessage, ...]) -> list[int]:
    """The prompt and the reply's tokens (its last one aside) of a greedy reply run alone."""
    run = Run(backend)
    rid = run.submit(messages)
    run.until_done()
    return run.replies[rid].context


def logits_of(llama, row: int) -> np.ndarray:
    """A copy of the logits llama.cpp computed for a row of the last batch (its buffer is reused)."""
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.context_pointer, row), shape=(llama.n_vocab,)).copy()


# No prefix cache: each reply alone starts cold, as it does batched (no warm prefix to differ by). No
# speculation: alone, Auto may verify a draft, a batch of its own (batched, a reply never drafts).
PLAIN = {"n_ctx": 4096, "prefix_cache_bytes": 0, "speculation": SpeculativeOptions("off")}


@pytest.fixture
def loaded(backend: GgufBackend, starter_model: Path) -> GgufBackend:
    backend.load(LoadRequest(str(starter_model), **PLAIN))
    return backend


def test_four_replies_batched_are_each_what_they_are_alone_token_for_token(loaded: GgufBackend):
    expected = [tokens_alone(loaded, chat(q)) for q in QUESTIONS]
    loaded.load(LoadRequest(loaded._info.path, **PLAIN))  # nothing left from them
    run = Run(loaded)
    ids = [run.submit(chat(q)) for q in QUESTIONS]
    assert loaded.free_slots == 0 and run.backend.running == 4
    run.until_done()
    assert run.widest == 4
    for rid, want in zip(ids, expected, strict=True):
        end = run.ends[rid]
        assert isinstance(end, Done) and run.text(rid) == end.text and end.stats.gen_tokens > 5
        assert run.replies[rid].context == want


def test_a_prompt_batched_with_others_would_not_be_what_it_is_alone(loaded: GgufBackend):
    """Why prompts go into the cache in batches of their own: in one batch with other sequences' tokens
    (64 or more in all), llama.cpp's attention takes its tiled kernel and the logits move."""
    llama = loaded._llama
    prompts = [loaded._tokenize(loaded._template.render(list(chat(q)))) for q in QUESTIONS]
    assert all(len(p) < 64 for p in prompts) and sum(len(p) for p in prompts) >= 64
    assert llama.decode(prompts[2], 0, 0) == 0
    own = logits_of(llama, -1)
    llama.clear()
    rows = [BatchRow(t, i, s, s == 2 and i == len(p) - 1) for s, p in enumerate(prompts) for i, t in enumerate(p)]
    assert llama.decode_rows(rows) == 0
    assert np.abs(logits_of(llama, -1) - own).max() > 0.01
    llama.clear()


def test_seeded_sampling_batched_gives_the_same_draws_as_alone(loaded: GgufBackend):
    sampled = SamplingParams(temperature=0.9, max_tokens=24, seed=7)
    want = alone(loaded, chat("Tell me a story."), sampled)
    loaded.load(LoadRequest(loaded._info.path, **PLAIN))
    run = Run(loaded)
    other = run.submit(chat("Name three colours."))
    rid = run.submit(chat("Tell me a story."), sampled)
    run.until_done()
    assert run.ends[rid].text == want.text and isinstance(run.ends[other], Done)


def test_a_new_prompt_joins_replies_that_are_running(loaded: GgufBackend):
    run = Run(loaded)
    first = [run.submit(chat(q)) for q in QUESTIONS[:3]]
    while not all(run.texts[r] for r in first):
        run.step()
    assert not run.ends  # three streaming
    late = run.submit(chat(QUESTIONS[3]))
    before = [len(run.texts[r]) for r in first]
    steps_to_first_token = 0
    while not run.texts[late]:
        run.step()
        steps_to_first_token += 1
    # Its prompt went in at the next step or the one after (the three's tokens take turns with it)
    assert steps_to_first_token <= 2 and not run.ends and run.backend.running == 4
    run.step()
    assert all(len(run.texts[r]) > n for r, n in zip(first, before, strict=True))  # and they went on
    run.until_done()
    assert all(isinstance(run.ends[r], Done) for r in [*first, late])


def test_every_slot_taken_is_refused_by_name(loaded: GgufBackend):
    run = Run(loaded)
    for q in QUESTIONS:
        run.submit(chat(q))
    with pytest.raises(BackendError, match="All 4 reply slots are in use") as caught:
        run.submit(chat("One more?"))
    assert caught.value.kind == "busy"
    run.until_done()
    assert len(run.ends) == 4 and loaded.free_slots == 4


def test_a_reply_cancelled_while_its_prompt_is_half_prefilled_leaves_at_once(loaded: GgufBackend):
    long_system = " ".join(f"Rule {i}: answer in one short sentence about topic {i}." for i in range(120))
    run = Run(loaded)
    streaming = run.submit(chat(QUESTIONS[0]))
    run.step()  # its prompt in, its first token out
    long = run.submit(chat("Which rule matters most?", system=long_system))
    prompt = loaded._batch.running[-1].prompt
    assert len(prompt) > 2 * loaded._llama.n_batch  # three chunks at least
    reply = loaded._batch.running[-1]
    while not reply.prefilled:
        run.step()
    assert 0 < reply.prefilled < len(prompt)  # half in the cache
    run.cancelled.add(long)
    run.step()
    end = run.ends[long]
    assert isinstance(end, Done) and end.finish_reason == "cancelled" and end.stats.gen_tokens == 0
    assert run.backend.running == 1  # the other goes on
    run.until_done()
    assert run.ends[streaming].text == alone(loaded, chat(QUESTIONS[0])).text


def test_a_shared_system_prompt_is_prefilled_once_for_replies_beside_each_other(loaded: GgufBackend):
    system = " ".join(f"Fact {i}: the library opens at {i % 12 + 1} o'clock on day {i}." for i in range(40))
    run = Run(loaded)
    first = run.submit(chat("When do you open?", system=system))
    while not run.texts[first]:  # its prompt is in the cache
        run.step()
    second = run.submit(chat("Where are the maps?", system=system))
    newest = loaded._batch.running[-1]
    system_tokens = len(loaded._tokenize(loaded._template.render([ChatMessage("system", system)],
                                                                 add_generation_prompt=False)))
    assert newest.cached >= system_tokens > 300  # its cells are the first reply's
    run.until_done()
    assert run.ends[second].stats.cached_tokens == newest.cached
    assert isinstance(run.ends[first], Done)


def test_a_full_cache_ends_the_newest_reply_and_the_others_go_on(backend: GgufBackend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=512, prefix_cache_bytes=0))
    long = SamplingParams(temperature=0.0, max_tokens=400, seed=1)
    run = Run(backend)
    ids = [run.submit(chat(f"Write a long essay about the number {i}."), long) for i in range(3)]
    run.until_done()
    errors = {rid: e for rid, e in run.ends.items() if isinstance(e, BackendError)}
    assert errors and ids[0] not in errors  # the first reply is never the one to go
    for error in errors.values():
        assert error.kind == "context_overflow" and "The KV cache is full with" in str(error)
    done = [run.ends[r] for r in ids if r not in errors]
    assert all(d.finish_reason in ("length", "stop") for d in done)
    assert backend._prefixes.seqs.used_cells() <= backend._llama.n_ctx


def test_the_memory_report_counts_each_conversation_in_the_cache(loaded: GgufBackend):
    run = Run(loaded)
    ids = [run.submit(chat(q)) for q in QUESTIONS[:3]]
    while not all(run.texts[r] for r in ids):
        run.step()
    report = loaded.memory()
    held = loaded._prefixes.seqs.slot_tokens()
    assert report.parallel == 4 and report.kv_sequence_tokens == tuple(n for n in held if n)
    assert len(report.kv_sequence_tokens) == 3 and sum(report.kv_sequence_tokens) == report.kv_tokens_used
    run.until_done()

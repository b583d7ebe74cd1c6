"""The prefix cache: the RAM tier on its own, and end to end with real llama.cpp."""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from pathlib import Path

import llama_cpp
import pytest

from engine.client import EngineClient
from engine.gguf.backend import GgufBackend
from engine.gguf.prefix_cache import (
    CacheEntry,
    CacheKey,
    PrefixCache,
    common_prefix_len,
    model_identity,
)
from engine.gguf.prefix_store import PrefixStore
from engine.protocol import ChatMessage, Done, Loaded, LoadRequest, SamplingParams
from tests.engine.helpers import collect, reply, wait_for

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)
KEY = CacheKey("model-a", "n_ctx=2048")

# Long enough that reusing it is worth measuring, short enough for a 2-core machine.
SYSTEM = "You are a careful assistant for a small bakery. " + " ".join(
    f"Rule {i}: answer politely, mention the daily bread number {i}, and keep replies short."
    for i in range(20)
)
A = [
    ChatMessage("system", "You are a geography tutor. " * 20),
    ChatMessage("user", "What is the capital of France?"),
]
B = [ChatMessage("system", "You are a chemistry tutor. " * 20), ChatMessage("user", "What is water made of?")]


def entry(tokens: list[int], nbytes: int = 100, key: CacheKey = KEY) -> CacheEntry:
    return CacheEntry(key, tuple(tokens), bytearray(nbytes))


# ---------------------------------------------------------------- the RAM tier


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len([1, 2, 3], [1, 2, 3, 4]) == 3
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([5] * 1000 + [1], [5] * 1000 + [2]) == 1000


def test_lookup_finds_the_longest_shared_prefix_of_the_same_key():
    cache = PrefixCache(10_000)
    cache.put(entry([1, 2, 3, 4, 5]))
    cache.put(entry([1, 2, 9, 9]))
    cache.put(entry([1, 2, 3, 4, 5, 6, 7], key=CacheKey("model-b", "n_ctx=2048")))
    best, n = cache.lookup(KEY, [1, 2, 3, 4, 8])
    assert best is not None and best.tokens == (1, 2, 3, 4, 5) and n == 4
    assert cache.lookup(CacheKey("model-a", "n_ctx=4096"), [1, 2, 3]) == (None, 0)
    assert cache.lookup(KEY, [7, 1, 2]) == (None, 0)


def test_an_entry_replaces_the_entries_it_extends():
    cache = PrefixCache(10_000)
    cache.put(entry([1, 2, 3]))
    cache.put(entry([1, 2, 3, 4, 5]))
    assert [e.tokens for e in cache] == [(1, 2, 3, 4, 5)]
    assert cache.total_bytes == 100


def test_budget_is_honoured_with_50_conversations_and_the_oldest_go_first():
    cache = PrefixCache(budget_bytes=20 * 1000)
    for i in range(50):
        assert cache.put(entry([1, 1000 + i, 7], nbytes=1000))
        assert cache.total_bytes <= cache.budget_bytes
    assert len(cache) == 20
    assert [e.tokens[1] for e in cache] == list(range(1030, 1050))
    # A lookup makes an entry the most recently used: it survives the next eviction.
    cache.lookup(KEY, [1, 1030, 7])
    cache.put(entry([1, 2000, 7], nbytes=1000))
    kept = {e.tokens[1] for e in cache}
    assert 1030 in kept and 1031 not in kept


def test_an_entry_over_the_budget_is_not_stored():
    cache = PrefixCache(budget_bytes=500)
    assert not cache.put(entry([1, 2], nbytes=501))
    assert len(cache) == 0 and cache.total_bytes == 0


# ---------------------------------------------------------------- end to end


def start(starter_model: Path, tmp_path: Path, **load_args) -> EngineClient:
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    client.load(LoadRequest(str(starter_model), n_ctx=2048, **load_args))
    assert isinstance(wait_for(client, (Loaded,)), Loaded)
    return client


def ask(client: EngineClient, messages: list[ChatMessage]) -> Done:
    done = collect(client, client.generate(messages, GREEDY)).end
    assert isinstance(done, Done), done
    return done


@pytest.fixture(scope="module")
def engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory):
    client = start(starter_model, tmp_path_factory.mktemp("logs"))
    yield client
    client.shutdown()


def test_switching_back_to_a_conversation_resumes_its_history(engine: EngineClient):
    a1 = ask(engine, A)
    b1 = ask(engine, B)
    assert b1.stats.cached_tokens < 10  # B shares nothing but the template's first tokens with A
    a2 = ask(engine, [*A, ChatMessage("assistant", a1.text), ChatMessage("user", "And of Italy?")])
    assert a2.stats.cached_tokens >= a1.stats.prompt_tokens
    assert a2.stats.prompt_tokens - a2.stats.cached_tokens < 40


def test_a_new_conversation_reuses_a_shared_system_prompt(engine: EngineClient, starter_model: Path):
    first = ask(engine, [ChatMessage("system", SYSTEM), ChatMessage("user", "Do you sell rye bread?")])
    ask(engine, B)  # something else in between, so the live context no longer holds it
    second = ask(engine, [ChatMessage("system", SYSTEM), ChatMessage("user", "When do you open?")])
    llm_tokens = len(
        llama_cpp.Llama(str(starter_model), vocab_only=True, verbose=False).tokenize(SYSTEM.encode())
    )
    assert first.stats.prompt_tokens > llm_tokens > 300
    assert second.stats.cached_tokens >= llm_tokens


def test_continuing_an_older_branch_reuses_its_history(engine: EngineClient):
    """A chat's branches (an edited message, a regenerated reply) share the history up to where they part;
    going back to an older branch after working on a newer one prefills only what follows its last reply."""
    system = ChatMessage("system", SYSTEM)
    # A reply long enough that its branch is worth keeping when the newer one takes the cells (prefix_reuse.py:
    # MIN_SAVED_TOKENS; one this long is well past it).
    first = collect(engine, engine.generate([system, ChatMessage("user", "Do you sell rye bread?")],
                                            replace(GREEDY, max_tokens=80))).end
    assert isinstance(first, Done) and first.stats.gen_tokens >= 64
    old_branch = [system, ChatMessage("user", "Do you sell rye bread?"), ChatMessage("assistant", first.text)]
    newer = ask(engine, [system, ChatMessage("user", "When do you open on Sundays?")])  # the message edited
    newer_branch = [system, ChatMessage("user", "When do you open on Sundays?"), ChatMessage("assistant", newer.text)]
    ask(engine, [*newer_branch, ChatMessage("user", "And on Mondays?")])
    back = ask(engine, [*old_branch, ChatMessage("user", "Is it baked today?")])
    assert back.stats.cached_tokens >= first.stats.prompt_tokens
    assert back.stats.prompt_tokens - back.stats.cached_tokens < 40


def test_greedy_output_with_the_cache_equals_output_without(starter_model: Path, tmp_path: Path):
    turn2 = None
    with_cache = start(starter_model, tmp_path)
    try:
        a1 = ask(with_cache, A)
        ask(with_cache, B)
        turn2 = [*A, ChatMessage("assistant", a1.text), ChatMessage("user", "Name three rivers there.")]
        cached = ask(with_cache, turn2)
        assert cached.stats.cached_tokens >= a1.stats.prompt_tokens
    finally:
        with_cache.shutdown()
    without = start(starter_model, tmp_path, prefix_cache_bytes=0)
    try:
        cold = ask(without, turn2)
    finally:
        without.shutdown()
    assert cold.stats.cached_tokens == 0
    assert cached.text == cold.text and cached.stats.gen_tokens == cold.stats.gen_tokens


# ---------------------------------------------------------------- the backend directly


def generate(backend: GgufBackend, messages: list[ChatMessage]) -> Done:
    return reply(backend, messages, GREEDY)


def test_other_settings_never_reuse_a_state(backend: GgufBackend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, kv_type="f16"))
    generate(backend, A)
    generate(backend, B)  # A's state is now in the RAM tier
    for other in (
        LoadRequest(str(starter_model), n_ctx=2048, kv_type="q8_0"),
        LoadRequest(str(starter_model), n_ctx=1024),
    ):
        backend.load(other)
        assert len(backend._cache) >= 1
        assert generate(backend, A).stats.cached_tokens == 0
        generate(backend, B)


def test_the_same_settings_reuse_a_state_after_a_reload(backend: GgufBackend, starter_model: Path):
    request = LoadRequest(str(starter_model), n_ctx=2048)
    backend.load(request)
    a = generate(backend, A)
    generate(backend, B)
    backend.load(request)
    assert generate(backend, A).stats.cached_tokens == a.stats.prompt_tokens - 1


def test_another_model_file_never_reuses_a_state(backend: GgufBackend, starter_model: Path, tmp_path: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    generate(backend, A)
    generate(backend, B)
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(starter_model.read_bytes())
    backend.load(LoadRequest(str(copy), n_ctx=2048))
    assert generate(backend, A).stats.cached_tokens == 0


def test_a_saved_state_holds_kv_bytes_only(backend: GgufBackend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    generate(backend, A)
    generate(backend, B)
    model = backend._llama.model_pointer
    head_dim = llama_cpp.llama_model_n_embd(model) // llama_cpp.llama_model_n_head(model)
    per_token = (
        2 * llama_cpp.llama_model_n_layer(model) * llama_cpp.llama_model_n_head_kv(model) * head_dim * 2
    )
    saved = [e for e in backend._cache if e.key == backend._cache_key]  # f16, this load's settings
    a_tokens = tuple(backend._tokenize(backend._template.render(A)))
    assert any(e.tokens[: len(a_tokens)] == a_tokens for e in saved)  # A, left for B
    for e in saved:
        assert len(e.tokens) * per_token <= e.nbytes <= 1.5 * per_token * len(e.tokens)


# ---------------------------------------------------------------- the disk tier


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(100))
    return path


def disk_entry(model_file: Path, tokens: list[int], nbytes: int = 1000) -> CacheEntry:
    return CacheEntry(
        CacheKey(model_identity(model_file), "s"), tuple(tokens), bytearray(range(256)) * (nbytes // 256)
    )


def written_store(tmp_path: Path, model_file: Path, *entries: CacheEntry) -> PrefixStore:
    store = PrefixStore(tmp_path / "cache", 1 << 20)
    for e in entries:
        store.put(e)
    store.flush()
    return store


def test_disk_entries_survive_a_new_store_and_load_intact(tmp_path: Path, model_file: Path):
    e = disk_entry(model_file, [1, 2, 3, 4])
    written_store(tmp_path, model_file, e).close()
    store = PrefixStore(tmp_path / "cache", 1 << 20)
    found, n = store.lookup(e.key, [1, 2, 3, 9])
    assert found is not None and n == 3
    loaded = store.load(found)
    assert loaded is not None and loaded.tokens == e.tokens and loaded.state == e.state


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "foreign_version", "not_ours"])
def test_a_damaged_or_foreign_entry_file_is_ignored_and_removed(
    damage: str, tmp_path: Path, model_file: Path
):
    e = disk_entry(model_file, [1, 2, 3, 4])
    store = written_store(tmp_path, model_file, e)
    store.close()
    path = store.path_for(e)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) - 100])
    elif damage == "corrupted":
        path.write_bytes(data[:-10] + bytes(10))  # same length: only the checksum can tell
    elif damage == "foreign_version":
        path.write_bytes(data.replace(b"llama-cpp-python ", b"llama-cpp-python 0.0.1+"))
    else:
        path.write_bytes(b"hello" * 100)
    fresh = PrefixStore(tmp_path / "cache", 1 << 20)
    if damage == "corrupted":  # the header is fine, so the file is indexed; loading it catches it
        found, _ = fresh.lookup(e.key, e.tokens)
        assert found is not None and fresh.load(found) is None
    assert fresh.lookup(e.key, e.tokens) == (None, 0)
    assert not path.exists()


def test_entries_of_a_changed_model_file_are_removed(tmp_path: Path, model_file: Path):
    e = disk_entry(model_file, [1, 2, 3, 4])
    written_store(tmp_path, model_file, e).close()
    model_file.write_bytes(b"GGUF" + bytes(200))  # the file was replaced: new size and mtime
    fresh = PrefixStore(tmp_path / "cache", 1 << 20)
    assert len(fresh) == 0 and not list((tmp_path / "cache").iterdir())


def test_a_full_disk_drops_the_entry_and_nothing_else(
    tmp_path: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
):
    def no_space(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    store = written_store(tmp_path, model_file, disk_entry(model_file, [1, 2, 3]))
    assert len(store) == 0 and not list((tmp_path / "cache").iterdir())
    monkeypatch.undo()
    store.put(disk_entry(model_file, [5, 6, 7]))
    store.flush()
    assert len(store) == 1
    store.close()


def test_the_disk_budget_is_honoured(tmp_path: Path, model_file: Path):
    store = PrefixStore(tmp_path / "cache", budget_bytes=10 * 1200)
    for i in range(50):
        store.put(disk_entry(model_file, [1, 100 + i, 2], nbytes=1024))
    store.flush()
    assert store.total_bytes <= store.budget_bytes
    assert len(store) == len(list((tmp_path / "cache").iterdir())) >= 5
    store.close()


def test_after_an_engine_restart_the_prefix_comes_from_disk(starter_model: Path, tmp_path: Path):
    cache_dir = str(tmp_path / "prefixes")
    client = start(starter_model, tmp_path, prefix_cache_dir=cache_dir)
    try:
        a1 = ask(client, A)
        client.restart()
        client.load(LoadRequest(str(starter_model), n_ctx=2048, prefix_cache_dir=cache_dir))
        assert isinstance(wait_for(client, (Loaded,)), Loaded)
        a2 = ask(client, [*A, ChatMessage("assistant", a1.text), ChatMessage("user", "And of Italy?")])
    finally:
        client.shutdown()
    assert a2.stats.cached_tokens >= a1.stats.prompt_tokens

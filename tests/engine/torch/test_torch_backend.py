"""TorchBackend on a tiny model folder: chat template, streaming, stats, memory, bad input;
and the engine process choosing it for a folder (GGUF for a file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.backend import BackendError
from engine.client import EngineClient
from engine.protocol import (
    ChatMessage,
    CountTokensRequest,
    Done,
    Error,
    GenerateRequest,
    Loaded,
    LoadRequest,
    MemoryReport,
    ReplyShape,
    SamplingParams,
)
from engine.torch.backend import TorchBackend
from engine.torch.sequence import SamplingOptions
from tests.engine.helpers import collect, load
from tests.fixtures.tiny_hf import big_folder, write_tiny_model

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
HELLO = (ChatMessage("user", "Hello, how are you today?"),)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-chat")
    write_tiny_model(directory, "qwen2")
    return directory


@pytest.fixture(scope="module")
def backend(model_dir: Path):
    b = TorchBackend(device="cpu")
    info = b.load(LoadRequest(str(model_dir), n_ctx=256))
    assert info.architecture == "qwen2" and info.has_chat_template and info.n_ctx == 256
    yield b
    b.close()


def run(backend: TorchBackend, messages=HELLO, sampling=GREEDY, cancel_after: int | None = None) -> tuple[Done, list[str]]:
    pieces: list[str] = []
    done = backend.generate(
        GenerateRequest(1, messages, sampling), pieces.append,
        lambda: cancel_after is not None and len(pieces) >= cancel_after,
    )
    return done, pieces


def test_streams_what_it_reports_with_stats(backend: TorchBackend) -> None:
    done, pieces = run(backend)
    assert done.text == "".join(pieces) and done.finish_reason in ("stop", "length")
    s = done.stats
    assert s.prompt_tokens > 5 and 1 <= s.gen_tokens <= 12 and s.ttft_s > 0 and s.prefill_tok_s > 0
    assert set(s.as_dict()) - {"draft_acceptance"} == {
        "ttft_s", "prompt_tokens", "cached_tokens", "gen_tokens", "prefill_tok_s", "decode_tok_s", "reasoning_tokens"
    }


def test_greedy_is_deterministic_and_seeded_sampling_repeats(backend: TorchBackend) -> None:
    assert run(backend)[0].text == run(backend)[0].text
    seeded = SamplingParams(temperature=1.0, top_p=0.9, top_k=50, max_tokens=12, seed=7)
    assert run(backend, sampling=seeded)[0].text == run(backend, sampling=seeded)[0].text


def test_next_turn_reuses_the_cached_prefix(backend: TorchBackend) -> None:
    long_system = ChatMessage("system", "The quick brown fox jumps over the lazy dog. " * 6)
    first, _ = run(backend, (long_system, *HELLO))
    second, _ = run(backend, (long_system, *HELLO, ChatMessage("assistant", first.text), ChatMessage("user", "Hi")))
    assert second.stats.cached_tokens >= 16 * (first.stats.prompt_tokens // 16) - 16
    assert second.stats.cached_tokens > 0


def test_cancel_stops_the_reply(backend: TorchBackend) -> None:
    done, pieces = run(backend, sampling=SamplingParams(temperature=0.0, max_tokens=200), cancel_after=1)
    assert done.finish_reason == "cancelled" and done.stats.gen_tokens < 200


def test_raw_prompt_skips_the_template(backend: TorchBackend) -> None:
    done = backend.generate(GenerateRequest(2, (), GREEDY, prompt="The quick brown"), lambda _: None, lambda: False)
    assert done.stats.prompt_tokens < 10


def test_memory_reports_weights_and_kv_blocks(backend: TorchBackend) -> None:
    run(backend)
    report = backend.memory()
    (cpu,) = report.devices
    d = backend.details()
    assert cpu.device == "cpu" and cpu.weights_bytes == d.weights_bytes > 0
    assert cpu.kv_allocated_bytes == d.kv_blocks_total * d.kv_bytes_per_block > 0
    assert report.kv_tokens_total == d.kv_blocks_total * 16 and d.activation_peak_bytes > 0
    assert cpu.kv_used_bytes == d.kv_blocks_used * d.kv_bytes_per_block and cpu.compute_bytes == d.activation_peak_bytes
    assert cpu.total_bytes > cpu.free_bytes > 0 and cpu.other_bytes > 0  # the rest of the process, from RSS
    assert 0 <= d.kv_blocks_shared <= d.kv_blocks_used <= d.kv_blocks_total


def test_a_finished_reply_leaves_its_prefix_kept_for_reuse(model_dir: Path) -> None:
    """After a reply nothing is in use, and the full blocks of its prompt are reported as kept: the
    next turn starts from them."""
    b = TorchBackend(device="cpu", speculative_tokens=0)
    b.load(LoadRequest(str(model_dir), n_ctx=256))
    assert b.memory().kv_cached_tokens == 0
    first, _ = run(b)
    report = b.memory()
    assert report.kv_tokens_used == 0
    assert report.kv_cached_tokens == b.details().kv_blocks_cached * 16 >= 16
    assert report.kv_cached_tokens <= first.stats.prompt_tokens + first.stats.gen_tokens
    assert MemoryReport.from_dict(report.to_dict()).kv_cached_tokens == report.kv_cached_tokens


def test_prompt_longer_than_the_context_is_a_clear_error(backend: TorchBackend) -> None:
    with pytest.raises(BackendError, match="context holds 256") as info:
        run(backend, (ChatMessage("user", "fox " * 400),))
    assert info.value.kind == "context_overflow"
    assert run(backend)[0].stats.gen_tokens >= 1  # the engine goes on


def test_broken_chat_template_fails_the_message_not_the_load(model_dir: Path, tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_bytes((model_dir / name).read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for %}"}))
    b = TorchBackend(device="cpu")
    b.load(LoadRequest(str(tmp_path), n_ctx=128))
    with pytest.raises(BackendError) as info:
        run(b)
    assert info.value.kind == "template"


def test_folder_that_is_not_a_model_is_invalid(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    with pytest.raises(BackendError, match="'BertModel' is not supported") as info:
        TorchBackend(device="cpu").load(LoadRequest(str(tmp_path)))
    assert info.value.kind == "invalid_model"


def test_engine_process_serves_a_model_folder(model_dir: Path, tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    try:
        loaded = load(client, str(model_dir), n_ctx=256)
        assert isinstance(loaded, Loaded), loaded
        assert loaded.info.architecture == "qwen2"
        reply = collect(client, client.generate(list(HELLO), GREEDY))
        assert isinstance(reply.end, Done), reply.end
        assert reply.end.text == reply.text and reply.memory
        bad = load(client, str(tmp_path))  # a folder with no config.json is taken for a GGUF path
        assert isinstance(bad, Error) and bad.kind == "invalid_model"
    finally:
        client.shutdown()


def test_prompt_lookup_speculation_leaves_greedy_replies_unchanged(model_dir: Path) -> None:
    replies = []
    for k in (0, 4):
        b = TorchBackend(device="cpu", speculative_tokens=k)
        b.load(LoadRequest(str(model_dir), n_ctx=256))
        messages = (ChatMessage("user", "The quick brown fox jumps over the lazy dog. " * 4),)
        replies.append(run(b, messages, SamplingParams(temperature=0.0, max_tokens=30))[0].text)
        assert (b.last_acceptance_rate is None) == (k == 0)
        done, _ = run(b, messages, SamplingParams(temperature=0.0, max_tokens=30))
        assert (done.stats.draft_acceptance is None) == (k == 0)
        assert ("draft_acceptance" in done.stats.as_dict()) == (k > 0)
    assert replies[0] == replies[1]


def test_pinned_system_prompt_is_prefilled_at_load(model_dir: Path) -> None:
    system = "You are a fox. The quick brown fox jumps over the lazy dog, every day, in the forest. " * 3
    b = TorchBackend(device="cpu", speculative_tokens=0)
    b.load(LoadRequest(str(model_dir), n_ctx=256, pinned_prompts=(system,)))
    done, _ = run(b, (ChatMessage("system", system), *HELLO))
    assert done.stats.cached_tokens >= 32


def test_a_model_too_big_for_memory_is_refused_before_a_byte_is_read(model_dir: Path, tmp_path: Path) -> None:
    """A 70B-class dense folder on this machine: the engine says how much it needs and what is free,
    instead of filling RAM until the OS kills it. The weights file is a stub: reading it would fail
    with another message, so this one shows the check came first. The engine can load again after."""
    b = TorchBackend(device="cpu", speculative_tokens=0)
    with pytest.raises(BackendError) as err:
        b.load(LoadRequest(str(big_folder(tmp_path / "big70")), n_ctx=256))
    message = str(err.value)
    assert err.value.kind == "invalid_model"
    assert "big70 is too big for this machine's memory" in message and "GiB in fp32" in message
    assert "of RAM are free to use" in message and "GGUF" in message
    assert b.session is None
    b.load(LoadRequest(str(model_dir), n_ctx=256))
    assert run(b)[0].finish_reason in ("stop", "length")


def test_folder_without_tokenizer_is_invalid(model_dir: Path, tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((model_dir / name).read_bytes())
    with pytest.raises(BackendError, match="no tokenizer.json") as info:
        TorchBackend(device="cpu").load(LoadRequest(str(tmp_path)))
    assert info.value.kind == "invalid_model"


def test_tokenizer_larger_than_the_model_vocabulary_is_invalid(model_dir: Path, tmp_path: Path) -> None:
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((model_dir / name).read_bytes())
    config = json.loads((model_dir / "config.json").read_text())
    config["vocab_size"] = 200
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(BackendError) as info:
        TorchBackend(device="cpu").load(LoadRequest(str(tmp_path)))
    assert info.value.kind == "invalid_model"


def test_memory_report_counts_blocks_shared_by_two_requests(model_dir: Path) -> None:
    """Two live requests with a common 48-token prefix hold its 3 KV blocks once, both reading them."""
    b = TorchBackend(device="cpu", speculative_tokens=0)
    b.load(LoadRequest(str(model_dir), n_ctx=256))
    assert (b.memory().kv_shared_tokens, b.memory().kv_shared_bytes) == (0, 0)
    assert b.session is not None
    engine = b.session.engine  # two requests stepped by hand, to look at the blocks between two steps
    prefix = list(range(3, 51))
    first = engine.add_request(prefix + [60, 61], SamplingOptions(max_tokens=50, ignore_eos=True))
    engine.step()  # the first prompt is prefilled: its full blocks are in the prefix cache
    second = engine.add_request(prefix + [70, 71, 72], SamplingOptions(max_tokens=50, ignore_eos=True))
    engine.step()
    report, d = b.memory(), b.details()
    assert d.kv_blocks_shared == 3
    assert report.kv_shared_tokens == 48 and report.kv_shared_bytes == 3 * d.kv_bytes_per_block
    assert MemoryReport.from_dict(report.to_dict()) == report
    older = {k: v for k, v in report.to_dict().items() if not k.startswith("kv_shared")}  # an older status file
    assert MemoryReport.from_dict(older).kv_shared_tokens == 0
    engine.abort(first)
    engine.abort(second)
    while engine.has_unfinished():
        engine.step()
    assert b.memory().kv_shared_tokens == 0  # blocks held by one sequence (or none) are not shared


def test_a_json_schema_is_refused_by_name(backend: TorchBackend) -> None:
    shape = ReplyShape(json_schema='{"type": "object"}')
    with pytest.raises(BackendError, match="PyTorch engine cannot constrain") as caught:
        backend.generate(GenerateRequest(1, HELLO, GREEDY, shape=shape), lambda _t: None, lambda: False)
    assert caught.value.kind == "bad_request"


def test_a_thinking_budget_on_a_model_that_does_not_think_changes_nothing(backend: TorchBackend) -> None:
    done = backend.generate(GenerateRequest(1, HELLO, GREEDY, shape=ReplyShape(think_budget=10)),
                            lambda _t: None, lambda: False)
    assert done.text == run(backend)[0].text and done.stats.reasoning_tokens == 0


def test_a_count_is_the_prompt_a_reply_prefills(backend: TorchBackend) -> None:
    done, _ = run(backend)
    assert backend.count_tokens(CountTokensRequest(2, HELLO)) == done.stats.prompt_tokens
    with pytest.raises(BackendError, match="JSON schema"):  # refused as the reply would be
        backend.count_tokens(CountTokensRequest(3, HELLO, ReplyShape(json_schema='{"type": "object"}')))

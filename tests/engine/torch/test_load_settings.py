"""The user's settings of a torch engine load: the KV budget (CPU) or GPU memory share, and
speculative decoding off, by prompt lookup, or by a draft model sharing the tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from engine.backend import BackendError
from engine.protocol import ChatMessage, GenerateRequest, LoadRequest, SamplingParams
from engine.torch.backend import TorchBackend
from models.plan.load_options import SpeculativeOptions, TorchOptions
from tests.fixtures.tiny_hf import write_first_layer_copy, write_tiny_model

REWRITE = (ChatMessage("user", "Say it again: the quick brown fox jumps over the lazy dog. " * 3),)
GREEDY = SamplingParams(temperature=0.0, max_tokens=24)


@pytest.fixture(scope="module")
def target_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("target")
    write_tiny_model(directory, "qwen2", num_hidden_layers=3)
    return directory


@pytest.fixture(scope="module")
def draft_dir(target_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A same-family draft with the target's tokenizer: its embeddings and first layer."""
    return write_first_layer_copy(target_dir, tmp_path_factory.mktemp("draft"))


def reply(backend: TorchBackend) -> tuple[str, float | None]:
    done = backend.generate(GenerateRequest(1, REWRITE, GREEDY), lambda _: None, lambda: False)
    return done.text, done.stats.draft_acceptance


def loaded(target_dir: Path, **options) -> TorchBackend:
    """A CPU backend that loaded the target with these TorchOptions and SpeculativeOptions fields."""
    speculation = {k: options.pop(k) for k in list(options) if k in SpeculativeOptions.__dataclass_fields__}
    backend = TorchBackend(device="cpu")
    backend.load(LoadRequest(str(target_dir), n_ctx=256, speculation=SpeculativeOptions(**speculation),
                             torch=TorchOptions(**options)))
    return backend


def test_speculative_modes_give_the_plain_greedy_reply(target_dir: Path, draft_dir: Path) -> None:
    plain, none = reply(loaded(target_dir, mode="off"))
    assert none is None
    lookup_text, lookup_rate = reply(loaded(target_dir, mode="lookup", tokens=3))
    draft_text, draft_rate = reply(loaded(target_dir, mode="draft", draft_path=str(draft_dir)))
    assert lookup_text == plain and draft_text == plain
    assert lookup_rate is not None and draft_rate is not None and draft_rate > 0


def test_the_draft_model_itself_proposes_the_drafts(target_dir: Path, tmp_path: Path) -> None:
    """A draft identical to the target proposes its greedy tokens: every one is accepted. Prompt
    lookup, a draft model that is not used, or one whose KV cache lags its tokens cannot do that."""
    same = tmp_path / "same"
    shutil.copytree(target_dir, same)
    other = tmp_path / "other"  # same tokenizer, other weights: its drafts are rejected
    write_tiny_model(other, "qwen2", seed=5, num_hidden_layers=1)
    plain, _ = reply(loaded(target_dir, mode="off"))
    same_text, same_rate = reply(loaded(target_dir, mode="draft", draft_path=str(same)))
    other_text, other_rate = reply(loaded(target_dir, mode="draft", draft_path=str(other)))
    assert same_text == plain and other_text == plain
    assert same_rate == 1.0
    assert other_rate is not None and other_rate < 0.5


def test_a_draft_folder_alone_means_draft_speculation(target_dir: Path, draft_dir: Path) -> None:
    backend = loaded(target_dir, draft_path=str(draft_dir))  # speculative stays "auto"
    assert reply(backend)[1] is not None


def test_draft_with_another_tokenizer_is_refused(target_dir: Path, draft_dir: Path, tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((draft_dir / name).read_bytes())
    tokenizer = json.loads((draft_dir / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    a, b = sorted(vocab)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two tokens swapped: the same size, another tokenizer
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(BackendError, match="another tokenizer than the model") as info:
        loaded(target_dir, mode="draft", draft_path=str(tmp_path))
    assert info.value.kind == "invalid_model"


def test_draft_folder_that_is_not_a_model_is_refused(target_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="The draft model") as info:
        loaded(target_dir, mode="draft", draft_path=str(tmp_path))
    assert info.value.kind == "invalid_model"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"gpu_memory_fraction": 0.0}, "GPU memory fraction"),
        ({"gpu_memory_fraction": 1.5}, "GPU memory fraction"),
        ({"cpu_kv_bytes": 0}, "CPU KV budget"),
        ({"mode": "medusa"}, "Unknown speculative decoding 'medusa'"),
        ({"mode": "draft"}, "needs the draft model's folder"),
        ({"mode": "lookup", "draft_path": "/somewhere"}, "speculative decoding is 'lookup'"),
        ({"mode": "lookup", "tokens": 0}, "Draft tokens per step"),
    ],
)
def test_bad_settings_are_refused_by_name(target_dir: Path, settings: dict, message: str) -> None:
    with pytest.raises(BackendError, match=message) as info:
        loaded(target_dir, **settings)
    assert info.value.kind == "bad_request"


def test_cpu_kv_budget_sizes_the_block_pool(target_dir: Path) -> None:
    per_block = loaded(target_dir, cpu_kv_bytes=1 << 20).details().kv_bytes_per_block
    small = loaded(target_dir, cpu_kv_bytes=64 * per_block).details()
    large = loaded(target_dir, cpu_kv_bytes=128 * per_block).details()
    assert (small.kv_blocks_total, large.kv_blocks_total) == (64, 128)
    tiny = loaded(target_dir, cpu_kv_bytes=1).details()
    assert tiny.kv_blocks_total == 256 // 16 + 1  # never less than one full-length sequence


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_memory_fraction_sizes_the_block_pool(target_dir: Path) -> None:
    blocks = []
    for fraction in (0.2, 0.4):
        backend = TorchBackend(device="cuda")
        backend.load(LoadRequest(str(target_dir), n_ctx=256, torch=TorchOptions(gpu_memory_fraction=fraction)))
        blocks.append(backend.details().kv_blocks_total)
        backend.close()
    assert 1.5 * blocks[0] < blocks[1] < 2.5 * blocks[0]

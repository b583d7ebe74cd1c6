"""Loading Hugging Face model folders: config, sharded safetensors, and every bad-input case."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.torch.arch import load_model
from engine.torch.checkpoint import INDEX_NAME, TensorSource
from engine.torch.model_config import CheckpointError, ModelConfig
from tests.engine.torch.reference import greedy_with_logits
from tests.fixtures.tiny_hf import write_tiny_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-llama")
    write_tiny_model(directory, "llama", tokenizer=False)
    return directory


def shard(source: Path, target: Path, parts: int = 3) -> dict[str, str]:
    """Split source's model.safetensors into `parts` shards with an index, as save_pretrained does."""
    target.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(source / "model.safetensors"))
    names = sorted(tensors)
    weight_map: dict[str, str] = {}
    for i in range(parts):
        file = f"model-{i + 1:05d}-of-{parts:05d}.safetensors"
        chunk = {n: tensors[n] for n in names[i::parts]}
        save_file(chunk, str(target / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(chunk, file))
    (target / INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (target / "config.json").write_bytes((source / "config.json").read_bytes())
    return weight_map


def test_config_read_from_the_folder(tiny_dir: Path) -> None:
    config = ModelConfig.from_dir(tiny_dir)
    assert (config.family, config.num_layers, config.num_heads, config.num_kv_heads) == ("llama", 2, 4, 2)
    assert config.head_dim == 32 and config.awq is None and config.eos_token_ids == (2,)


def test_sharded_checkpoint_loads_the_same_model(tiny_dir: Path, tmp_path: Path) -> None:
    shard(tiny_dir, tmp_path / "sharded")
    prompt = list(range(3, 40))
    whole = greedy_with_logits(load_model(tiny_dir).model, prompt, 4)
    sharded = greedy_with_logits(load_model(tmp_path / "sharded").model, prompt, 4)
    assert torch.equal(whole[0], sharded[0]) and whole[2] == sharded[2]


def test_unsupported_architecture_is_named(tiny_dir: Path, tmp_path: Path) -> None:
    config = json.loads((tiny_dir / "config.json").read_text())
    config["architectures"] = ["GPT2LMHeadModel"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"'GPT2LMHeadModel' is not supported"):
        load_model(tmp_path)


def test_missing_shard_is_reported(tiny_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "sharded"
    shard(tiny_dir, target)
    (target / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"1 of 3 shards .* missing: model-00002-of-00003"):
        load_model(target)


def test_shard_that_does_not_match_the_index_is_reported(tiny_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "sharded"
    weight_map = shard(tiny_dir, target)
    # The index says the final norm is in shard 1 while it sits elsewhere.
    moved = "model.norm.weight"
    weight_map[moved] = "model-00001-of-00003.safetensors" if weight_map[moved] != "model-00001-of-00003.safetensors" else "model-00002-of-00003.safetensors"
    (target / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=r"the index puts tensor 'model.norm.weight' in"):
        load_model(target)


def test_shard_with_tensors_the_index_does_not_list(tiny_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "sharded"
    weight_map = shard(tiny_dir, target)
    del weight_map["model.norm.weight"]
    (target / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=r"tensors the index does not list: model.norm.weight"):
        load_model(target)


def test_truncated_shard_is_reported(tiny_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes((tiny_dir / "config.json").read_bytes())
    data = (tiny_dir / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model.safetensors"):
        load_model(tmp_path)


def test_missing_tensor_is_reported(tiny_dir: Path, tmp_path: Path) -> None:
    tensors = load_file(str(tiny_dir / "model.safetensors"))
    del tensors["model.layers.1.mlp.down_proj.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_bytes((tiny_dir / "config.json").read_bytes())
    with pytest.raises(CheckpointError, match=r"'model.layers.1.mlp.down_proj.weight' is missing"):
        load_model(tmp_path)


class _Trap:
    """Unpickling this would create a file: the loader must never unpickle."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_only_repo_is_refused_and_never_unpickled(tiny_dir: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "unpickled"
    (tmp_path / "config.json").write_bytes((tiny_dir / "config.json").read_bytes())
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps(_Trap(str(sentinel))))
    with pytest.raises(CheckpointError, match=r"only pickle weights \(pytorch_model.bin\).*safetensors only"):
        load_model(tmp_path)
    assert not sentinel.exists()


def test_folder_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no config.json"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    ("quant", "message"),
    [
        ({"quant_method": "bitsandbytes", "bits": 4}, r"quantization 'bitsandbytes' is not supported"),
        ({"quant_method": "awq", "bits": 4, "group_size": 16, "version": "gemm"}, "group size 16"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"}, "'gemv'"),
        ({"quant_method": "awq", "bits": 8, "group_size": 128}, "8-bit AWQ"),
    ],
)
def test_unsupported_quantization_is_refused(tiny_dir: Path, tmp_path: Path, quant: dict, message: str) -> None:
    config = json.loads((tiny_dir / "config.json").read_text())
    config["quantization_config"] = quant
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=message):
        ModelConfig.from_dir(tmp_path)


def test_unsupported_rope_scaling_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    config = json.loads((tiny_dir / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="RoPE scaling 'yarn' is not supported"):
        ModelConfig.from_dir(tmp_path)


def test_tensor_source_reads_lazily_by_name(tiny_dir: Path) -> None:
    source = TensorSource(tiny_dir)
    assert "model.norm.weight" in source and "nope" not in source
    assert source.get("model.norm.weight").shape == (128,)


# ---------------------------------------------------------------- tokenizer and chat template


def _tokenizer_dir(tmp_path: Path, chat_template) -> Path:
    from tests.fixtures.tiny_hf import write_tokenizer

    write_tokenizer(tmp_path, chat_template=None)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    if chat_template is not None:
        config["chat_template"] = chat_template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


def test_named_chat_templates_use_the_default_one(tmp_path: Path) -> None:
    from engine.protocol import ChatMessage
    from engine.torch.hf_tokenizer import HfTokenizer

    tok = HfTokenizer(_tokenizer_dir(tmp_path, [
        {"name": "tool_use", "template": "TOOLS"},
        {"name": "default", "template": "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"},
    ]))
    assert tok.has_chat_template
    assert tok.template.render([ChatMessage("user", "hi")], add_generation_prompt=False) == "[user]hi"


def test_chat_template_from_its_own_file(tmp_path: Path) -> None:
    from engine.protocol import ChatMessage
    from engine.torch.hf_tokenizer import HfTokenizer

    directory = _tokenizer_dir(tmp_path, None)
    (directory / "chat_template.jinja").write_text("{{ messages[0].content | upper }}")
    tok = HfTokenizer(directory)
    assert tok.template.render([ChatMessage("user", "hi")]) == "HI"


def test_template_tricks_are_stopped_by_the_sandbox(tmp_path: Path) -> None:
    from engine.chat_template import ChatTemplateError
    from engine.protocol import ChatMessage
    from engine.torch.hf_tokenizer import HfTokenizer

    tok = HfTokenizer(_tokenizer_dir(tmp_path, "{{ messages.__class__.__mro__ }}"))
    with pytest.raises(ChatTemplateError):
        tok.template.render([ChatMessage("user", "hi")])


def test_incremental_decoding_waits_for_whole_characters(tmp_path: Path) -> None:
    from engine.torch.hf_tokenizer import HfTokenizer, IncrementalDecoder

    tok = HfTokenizer(_tokenizer_dir(tmp_path, None))
    text = "Hello, fox 🦊 and ünïcode!"
    ids = tok.encode(text)
    decoder = IncrementalDecoder(tok)
    pieces = [decoder.feed(t) for t in ids]
    assert "".join(pieces) + decoder.flush() == text
    assert not any("\ufffd" in p for p in pieces)

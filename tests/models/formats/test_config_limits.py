"""One JSON reader for a checkpoint's files, with the same limits for `tailor plan` and both engines.

A config.json too large is refused before its bytes are read; one nested too deep is refused with
a clear line, never a bare RecursionError; both by the planner's reader and the engine's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.torch.model_config import CheckpointError, ModelConfig
from models.formats.byte_source import FileByteSource
from models.formats.errors import InvalidModelFile
from models.formats.hf_config import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    json_depth,
    read_hf_config,
    read_json_document,
)
from models.formats.safetensors_header import read_safetensors_index
from models.plan.folder_plan import folder_candidate

TAILOR = str(Path(sys.executable).with_name("tailor"))
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 320,
          "max_position_embeddings": 512}


def _nested(depth: int) -> dict:
    """CONFIG with an unused key nesting objects and lists so the whole document is `depth` deep."""
    inner: object = 1
    for level in range(depth - 1):
        inner = [inner] if level % 2 else {"x": inner}
    return {**CONFIG, "extra": inner}


def _huge(path: Path, size: int = 100 << 20) -> Path:
    """A sparse file of `size` bytes: as large as the issue's config.json, without writing 100 MB."""
    with path.open("wb") as f:
        f.write(b'{"a": "')
        f.truncate(size)
    return path


def _readers(folder: Path) -> list[tuple[str, Callable[[], object]]]:
    """Every reader of a folder's config.json: the planner's and the PyTorch engine's."""
    return [("plan", lambda: read_hf_config(folder / "config.json")),
            ("plan folder", lambda: folder_candidate(folder)),
            ("engine", lambda: ModelConfig.from_dir(folder))]


def _problem(call: Callable[[], object]) -> str:
    with pytest.raises((InvalidModelFile, CheckpointError)) as caught:
        call()
    return str(caught.value)


def test_a_config_over_the_cap_is_refused_unread_by_every_reader(tmp_path: Path):
    folder = tmp_path / "m"
    folder.mkdir()
    config = _huge(folder / "config.json")
    (folder / "model.safetensors").write_bytes(b"")
    expected = (f"{config}: config.json is larger than {MAX_JSON_BYTES >> 20} MiB ({100 << 20:,} bytes); "
                "refusing to read it")
    for name, read in _readers(folder):
        assert _problem(read) == expected, name
    source = FileByteSource(config)
    with pytest.raises(InvalidModelFile):
        read_json_document(source, what="config.json")
    assert source.bytes_fetched == 0  # not one byte read, let alone parsed
    source.close()


def test_a_source_without_a_known_size_is_cut_at_the_cap(tmp_path: Path):
    class Unsized(FileByteSource):
        @property
        def size(self) -> int | None:
            return None

    source = Unsized(_huge(tmp_path / "config.json", (MAX_JSON_BYTES) + (4 << 20)))
    with pytest.raises(InvalidModelFile, match="larger than 64 MiB"):
        read_json_document(source, what="config.json")
    assert source.bytes_fetched <= MAX_JSON_BYTES + (1 << 20)
    source.close()


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_deep_nesting_is_one_clear_error_for_every_reader(tmp_path: Path, depth: int):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_nested(depth)) if depth < 1000 else
                                        '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}")
    (folder / "model.safetensors").write_bytes(b"")
    expected = f"{folder / 'config.json'}: config.json nests JSON too deeply ({depth} levels; the limit is 64)"
    for name, read in _readers(folder):
        assert _problem(read) == expected, name


def test_nesting_up_to_the_limit_is_read_alike(tmp_path: Path):
    folder = tmp_path / "m"
    folder.mkdir()
    doc = _nested(MAX_JSON_DEPTH)
    doc["note"] = "brackets in strings do not nest: " + "[{" * 500  # nor do escaped quotes end strings: \\"
    (folder / "config.json").write_text(json.dumps(doc))
    assert json_depth((folder / "config.json").read_bytes()) == MAX_JSON_DEPTH
    assert read_hf_config(folder / "config.json").n_layers == 2
    assert ModelConfig.from_dir(folder).num_layers == 2


def test_the_shard_index_and_tokenizer_files_have_the_same_limits(tmp_path: Path):
    folder = tmp_path / "m"
    folder.mkdir()
    index = folder / "model.safetensors.index.json"
    index.write_text('{"weight_map": ' + "[" * 500 + "]" * 500 + "}")
    deep = f"{index}: model.safetensors.index.json nests JSON too deeply (501 levels; the limit is 64)"
    assert _problem(lambda: read_safetensors_index(index)).endswith("nests JSON too deeply (501 levels; the limit is 64)")
    pytest.importorskip("torch")
    from engine.torch.checkpoint import safetensors_files
    from engine.torch.hf_tokenizer import HfTokenizer
    from tests.fixtures.tiny_hf import write_tokenizer

    assert _problem(lambda: safetensors_files(folder)) == deep
    _huge(index)
    assert "is larger than 64 MiB" in _problem(lambda: safetensors_files(folder))
    index.unlink()

    write_tokenizer(folder)
    tokenizer_config = folder / "tokenizer_config.json"
    tokenizer_config.write_text('{"chat_template": "x", "added": ' + "{\"a\": " * 100 + "1" + "}" * 100 + "}")
    assert _problem(lambda: HfTokenizer(folder)) == (
        f"{tokenizer_config}: tokenizer_config.json nests JSON too deeply (101 levels; the limit is 64)")
    _huge(tokenizer_config)
    assert "tokenizer_config.json is larger than 64 MiB" in _problem(lambda: HfTokenizer(folder))
    write_tokenizer(folder)
    (folder / "generation_config.json").write_text('{"eos_token_id": [1, 2], "eos_token_id": 3}')
    assert "duplicate JSON key 'eos_token_id'" in _problem(lambda: HfTokenizer(folder))


@pytest.mark.parametrize("case", ["huge", "deep"])
def test_tailor_chat_and_plan_say_it_in_one_line(tmp_path: Path, case: str):
    folder = tmp_path / "m"
    folder.mkdir()
    config = folder / "config.json"
    if case == "huge":
        _huge(config)
        words = "config.json is larger than 64 MiB"
    else:
        config.write_text('{"a": ' + "[" * 99_999 + "]" * 99_999 + "}")
        words = "config.json nests JSON too deeply (100000 levels; the limit is 64)"
    (folder / "model.safetensors").write_bytes(b"")
    env = {**os.environ, "TAILOR_HOME": str(tmp_path / "home")}
    for args in (("plan", "--file", str(folder)), ("chat", "--model", str(folder), "hello")):
        result = subprocess.run([TAILOR, *args], capture_output=True, text=True, timeout=180, env=env)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1, result.stderr
        assert lines[0].startswith("tailor: error: ") and words in lines[0] and str(config) in lines[0], lines
        assert "RecursionError" not in result.stderr and result.stdout == ""

"""safetensors headers, sharded indexes and config.json, written by hand with struct + json."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from models.formats.errors import InvalidModelFile
from models.formats.safetensors_header import read_hf_config, read_safetensors_header, read_safetensors_index
from tests.fixtures.range_server import serve_files

NP_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8"}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Path:
    """A safetensors file as the format specifies it: u64 N, N bytes of JSON, then the data."""
    header: dict[str, object] = {"__metadata__": metadata} if metadata else {}
    offset, blobs = 0, []
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": NP_DTYPES[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    return write_raw(path, header, b"".join(blobs))


def write_raw(path: Path, header: object, data: bytes, pad: int = 8) -> Path:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % pad)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.fixture
def dense(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_safetensors(
        tmp_path / "model.safetensors",
        {
            "model.embed_tokens.weight": rng.standard_normal((512, 64)).astype(np.float16),
            "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((64, 64)).astype(np.float32),
            "model.norm.weight": np.ones(64, dtype=np.float32),
        },
        metadata={"format": "pt"},
    )


def test_dense_file(dense: Path) -> None:
    h = read_safetensors_header(dense)
    assert h.metadata == {"format": "pt"}
    assert [t.name for t in h.tensors][0] == "model.embed_tokens.weight"
    emb = h.tensor("model.embed_tokens.weight")
    assert (emb.ggml_type, emb.type_name, emb.shape, emb.offset, emb.nbytes) == (-1, "F16", (512, 64), 0, 512 * 64 * 2)
    assert h.tensor("model.norm.weight").shape == (64,)
    assert h.weights_bytes == h.file_size - h.data_offset
    assert not h.is_packed_quant and h.n_params() == 512 * 64 + 64 * 64 + 64


def test_awq_checkpoint(tmp_path: Path) -> None:
    k, n, group = 128, 256, 64  # in features, out features
    path = write_safetensors(
        tmp_path / "awq.safetensors",
        {
            "model.layers.0.mlp.up_proj.qweight": np.zeros((k, n // 8), dtype=np.int32),
            "model.layers.0.mlp.up_proj.qzeros": np.zeros((k // group, n // 8), dtype=np.int32),
            "model.layers.0.mlp.up_proj.scales": np.zeros((k // group, n), dtype=np.float16),
            "model.norm.weight": np.ones(k, dtype=np.float16),
        },
    )
    h = read_safetensors_header(path)
    assert h.is_packed_quant
    assert h.n_params(bits=4) == k * n + k
    assert h.weights_bytes == k * n // 2 + (k // group) * n // 2 + (k // group) * n * 2 + k * 2


def test_header_over_http_fetches_only_the_header(tmp_path: Path) -> None:
    path = write_safetensors(tmp_path / "big.safetensors", {"w": np.zeros((1024, 1024), dtype=np.float32)})
    with serve_files({"/big.safetensors": path}) as server:
        h = read_safetensors_header(server.url("/big.safetensors"))
        assert h.file_size == path.stat().st_size == 4 * (1 << 20) + h.data_offset
        server.wait_idle()  # every chunk the handler wrote is counted
        assert server.bytes_sent <= 1 << 20


def _header(**over: object) -> dict[str, object]:
    entry = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
    return {"a": {**entry, **over}}


HOSTILE = [
    ("empty", lambda p: p.write_bytes(b""), "ends inside the header length"),
    ("length-max", lambda p: p.write_bytes(struct.pack("<Q", (1 << 64) - 1) + b"{}"), "absurd"),
    ("length-past-eof", lambda p: p.write_bytes(struct.pack("<Q", 1000) + b"{}"), "ends inside the JSON header"),
    ("not-json", lambda p: p.write_bytes(struct.pack("<Q", 6) + b"{nope}"), "not valid JSON"),
    ("not-utf8", lambda p: p.write_bytes(struct.pack("<Q", 4) + b'"\xff"}'), "not valid UTF-8"),
    ("json-array", lambda p: write_raw(p, [1, 2], b""), "not an object"),
    ("deep-json", lambda p: p.write_bytes(struct.pack("<Q", 200000) + b"[" * 100000 + b"]" * 100000), "too deeply"),
    ("duplicate-key", lambda p: p.write_bytes(struct.pack("<Q", 16) + b'{"a": 1, "a": 2}'), "duplicate JSON key 'a'"),
    ("unknown-dtype", lambda p: write_raw(p, _header(dtype="F128"), b"\0" * 16), "unknown dtype 'F128'"),
    ("missing-field", lambda p: write_raw(p, {"a": {"dtype": "F32", "shape": [4]}}, b"\0" * 16), "exactly dtype"),
    ("negative-dim", lambda p: write_raw(p, _header(shape=[-2, -2]), b"\0" * 16), "invalid shape"),
    ("bool-dim", lambda p: write_raw(p, _header(shape=[True, 4]), b"\0" * 16), "invalid shape"),
    ("shape-mismatch", lambda p: write_raw(p, _header(shape=[3, 2]), b"\0" * 16), "needs 24 bytes but data_offsets give 16"),
    ("f4-odd", lambda p: write_raw(p, _header(dtype="F4", shape=[3], data_offsets=[0, 2]), b"\0" * 2), "needs 1.5 bytes"),
    ("offsets-reversed", lambda p: write_raw(p, _header(data_offsets=[16, 0]), b"\0" * 16), "out of order"),
    ("offsets-bad", lambda p: write_raw(p, _header(data_offsets=[0]), b"\0" * 16), "invalid data_offsets"),
    ("overlap", lambda p: write_raw(p, {**_header(), "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, b"\0" * 16), "overlap"),
    ("gap", lambda p: write_raw(p, _header(data_offsets=[8, 24]), b"\0" * 24), "gap of 8 bytes"),
    ("past-eof", lambda p: write_raw(p, _header(), b"\0" * 10), "past the end of the file"),
    ("trailing-bytes", lambda p: write_raw(p, _header(), b"\0" * 20), "4 bytes after its last tensor"),
    ("bad-metadata", lambda p: write_raw(p, {"__metadata__": {"n": 1}}, b""), "__metadata__"),
]


@pytest.mark.parametrize(("make", "expect"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_file(tmp_path: Path, make: Callable[[Path], object], expect: str) -> None:
    path = tmp_path / "bad.safetensors"
    make(path)
    start = time.perf_counter()
    with pytest.raises(InvalidModelFile) as info:
        read_safetensors_header(path)
    assert time.perf_counter() - start < 5
    assert expect in str(info.value) and str(info.value).startswith(f"{path}: ")


def test_index(tmp_path: Path) -> None:
    doc = {"metadata": {"total_size": 1234}, "weight_map": {"a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}}
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps(doc))
    with serve_files({"/index.json": path}) as server:
        for source in (path, server.url("/index.json")):
            index = read_safetensors_index(source)
            assert index.total_size == 1234 and index.weight_map["a"] == "model-00002-of-00002.safetensors"
            assert index.shards == ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


@pytest.mark.parametrize(
    ("doc", "expect"),
    [({"weight_map": {"a": "../../etc/passwd"}}, "outside its folder"), ({"weight_map": {"a": "/abs.safetensors"}}, "outside its folder"), ({"metadata": {}}, "no weight_map")],
)
def test_bad_index(tmp_path: Path, doc: dict, expect: str) -> None:
    path = tmp_path / "index.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidModelFile, match=expect):
        read_safetensors_index(path)


def test_config_llama_awq(tmp_path: Path) -> None:
    doc = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "float16",
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    c = read_hf_config(path)
    assert (c.architecture, c.model_type, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim) == ("LlamaForCausalLM", "llama", 32, 32, 8, 128)
    assert (c.hidden_size, c.intermediate_size, c.vocab_size, c.max_position_embeddings) == (4096, 14336, 128256, 131072)
    assert c.sliding_window is None and c.torch_dtype == "float16"
    assert c.quantization is not None and (c.quantization.quant_method, c.quantization.bits, c.quantization.group_size) == ("awq", 4, 128)


def test_config_multimodal_text_part_and_fp8(tmp_path: Path) -> None:
    doc = {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 1024, "model_type": "gemma3_text"},
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    c = read_hf_config(path)
    assert (c.model_type, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window) == ("gemma3_text", 34, 8, 4, 256, 1024)
    assert c.quantization is not None and (c.quantization.quant_method, c.quantization.bits) == ("fp8", 8)


def test_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(InvalidModelFile, match="config.json is not valid JSON"):
        read_hf_config(path)
    with pytest.raises(InvalidModelFile, match="no such file"):
        read_hf_config(tmp_path / "missing.json")

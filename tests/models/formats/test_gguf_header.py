"""GGUF header reader: the real starter model, a small file written by gguf-py, and a hostile corpus."""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import gguf
import pytest

from models.formats.byte_source import FileByteSource
from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import GgufArray, GgufHeader, read_gguf_header
from tests.fixtures.gguf_corpus import (
    ARCH_KV,
    CASES,
    GOOD_SHAPES,
    HPARAM_CASES,
    HostileCase,
    HparamCase,
    Layout,
    gguf_file,
    gstr,
    kv,
    kv_u32,
    layout,
    tensor_info,
    write_shaped_gguf,
    write_valid_gguf,
)


@pytest.fixture(scope="module")
def starter_header(starter_model: Path) -> GgufHeader:
    return read_gguf_header(starter_model)


@pytest.fixture(scope="module")
def valid_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_valid_gguf(tmp_path_factory.mktemp("gguf") / "valid.gguf")


@pytest.fixture(scope="module")
def valid_layout(valid_gguf: Path) -> Layout:
    return layout(valid_gguf)


def _cross_check(header: GgufHeader, path: Path) -> None:
    reader = gguf.GGUFReader(path)
    assert header.data_offset == reader.data_offset
    assert len(header.tensors) == len(reader.tensors)
    for ours, theirs in zip(header.tensors, reader.tensors, strict=True):
        assert ours.name == theirs.name
        assert ours.ggml_type == int(theirs.tensor_type)
        assert ours.type_name == theirs.tensor_type.name
        assert ours.shape == tuple(int(d) for d in theirs.shape)
        assert header.data_offset + ours.offset == theirs.data_offset
        assert ours.nbytes == int(theirs.n_bytes)


def test_starter_model_shape(starter_header: GgufHeader, starter_model: Path) -> None:
    h = starter_header
    assert (h.architecture, h.version, h.alignment) == ("llama", 3, 32)
    assert (h.n_layers, h.n_heads, h.n_kv_heads, h.n_embd, h.n_ff) == (30, 9, 3, 576, 1536)
    assert (h.head_dim_k, h.head_dim_v) == (64, 64)
    assert (h.n_vocab, h.n_ctx_train) == (49152, 8192)
    assert h.sliding_window is None and h.swa_layers is None
    assert (h.file_type, h.quant_name) == (3, "Q4_1")
    assert len(h.tensors) == 272
    assert h.file_size == starter_model.stat().st_size
    padding = h.file_size - h.data_offset - h.weights_bytes
    assert 0 <= padding < h.alignment * len(h.tensors)
    assert h.metadata["tokenizer.chat_template"].startswith("{% for message in messages %}")
    tokens = h.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, GgufArray) and tokens.length == 49152 and tokens.head[1] == "<|im_start|>"
    assert len(h.layer_tensors(0)) == 9 and len(h.layer_tensors(29)) == 9 and h.layer_tensors(30) == ()
    assert h.tensor("blk.0.attn_k.weight").shape == (576, 192)
    with pytest.raises(KeyError):
        h.tensor("nope")


def test_starter_model_matches_gguf_reader(starter_header: GgufHeader, starter_model: Path) -> None:
    _cross_check(starter_header, starter_model)


def test_small_file_written_by_gguf_py(valid_gguf: Path) -> None:
    h = read_gguf_header(valid_gguf)
    _cross_check(h, valid_gguf)
    assert h.name == "tiny corpus model"
    assert (h.n_layers, h.n_heads, h.n_kv_heads, h.n_ff) == (2, 4, 2, (128, 96))
    assert (h.head_dim_k, h.head_dim_v, h.n_vocab, h.n_ctx_train) == (16, 16, 2000, 256)
    assert h.metadata["tiny.nested"] == ((1, 2), (3, 4, 5))
    assert h.quant_name == "Q8_0"
    assert h.tensor("blk.1.ffn_up.weight").type_name == "Q8_0"
    assert h.weights_bytes == sum(t.nbytes for t in h.tensors)


def test_custom_alignment(tmp_path: Path) -> None:
    h = read_gguf_header(write_valid_gguf(tmp_path / "a64.gguf", alignment=64))
    assert h.alignment == 64 and h.data_offset % 64 == 0
    assert all(t.offset % 64 == 0 for t in h.tensors)


def test_quant_name_guessed_without_file_type(tmp_path: Path) -> None:
    data = struct.pack("<8H", *range(8))
    infos = [b"".join([gstr("w"), struct.pack("<I2QIQ", 2, 32, 4, 8, 0)])]  # Q8_0, 32 x 4
    path = tmp_path / "noft.gguf"
    path.write_bytes(gguf_file([ARCH_KV], infos, data=b"\0" * (34 * 4)) + data)
    h = read_gguf_header(path)
    assert h.file_type is None and h.quant_name == "Q8_0" and h.weights_bytes == 34 * 4


def test_q2_0_tensor_and_file_type_41(tmp_path: Path) -> None:
    # Q2_0 (ggml type 42): blocks of 64 values in 18 bytes; LLAMA_FTYPE_MOSTLY_Q2_0 is 41.
    infos = [tensor_info("blk.0.ffn_up.weight", (128, 4), ggml_type=42), tensor_info("norm", (128,), offset=160)]
    path = tmp_path / "q2_0.gguf"
    path.write_bytes(gguf_file([ARCH_KV, kv_u32("general.file_type", 41)], infos, data=b"\0" * (160 + 512)))
    h = read_gguf_header(path)
    assert (h.file_type, h.quant_name) == (41, "Q2_0")
    w = h.tensor("blk.0.ffn_up.weight")
    assert (w.type_name, w.nbytes) == ("Q2_0", 128 // 64 * 18 * 4)
    assert h.weights_bytes == 144 + 128 * 4


def _bools(key: str, values: list[bool]) -> bytes:
    return kv(key, 9, struct.pack("<IQ", 7, len(values)) + bytes(values))


@pytest.mark.parametrize(
    ("arch", "pattern", "expected"),
    [
        ("gemma3", None, (True,) * 5 + (False,) + (True,) * 5 + (False,)),
        ("gemma2", None, (True, False) * 6),
        ("cohere2", kv_u32("cohere2.attention.sliding_window_pattern", 3), (True, True, False) * 4),
        ("exaone4", _bools("exaone4.attention.sliding_window_pattern", [True, False] * 6), (True, False) * 6),
        ("mistral", None, None),
    ],
)
def test_sliding_window_layout(tmp_path: Path, arch: str, pattern: bytes | None, expected: tuple[bool, ...] | None) -> None:
    kvs = [kv("general.architecture", 8, gstr(arch)), kv_u32(f"{arch}.block_count", 12), kv_u32(f"{arch}.attention.sliding_window", 4096)]
    path = tmp_path / f"{arch}.gguf"
    path.write_bytes(gguf_file(kvs + ([pattern] if pattern else []), []))
    h = read_gguf_header(path)
    assert h.sliding_window == 4096
    assert h.swa_layers == expected


def test_per_layer_kv_heads(tmp_path: Path) -> None:
    heads = kv("llama.attention.head_count_kv", 9, struct.pack("<IQ3I", 4, 3, 2, 0, 4))
    path = tmp_path / "perlayer.gguf"
    path.write_bytes(gguf_file([ARCH_KV, kv_u32("llama.attention.head_count", 8), kv_u32("llama.embedding_length", 512), heads], []))
    h = read_gguf_header(path)
    assert h.n_kv_heads == (2, 0, 4) and h.head_dim_k == 64


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_file(case: HostileCase, valid_gguf: Path, valid_layout: Layout, tmp_path: Path) -> None:
    path = tmp_path / f"{case.id}.gguf"
    path.write_bytes(case.make(valid_gguf.read_bytes(), valid_layout))
    start = time.perf_counter()
    with pytest.raises(InvalidModelFile) as info:
        read_gguf_header(path)
    assert time.perf_counter() - start < 5
    assert case.expect in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize("shape", GOOD_SHAPES, ids=list(GOOD_SHAPES))
def test_real_shaped_headers_pass_the_hyperparameter_checks(shape: str, tmp_path: Path) -> None:
    s = GOOD_SHAPES[shape]
    h = read_gguf_header(write_shaped_gguf(tmp_path / f"{shape}.gguf", s))
    assert h.architecture == s.arch and h.n_layers == s.kvs["block_count"][0]


def test_gemma3_like_window_and_layout(tmp_path: Path) -> None:
    h = read_gguf_header(write_shaped_gguf(tmp_path / "gemma3.gguf", GOOD_SHAPES["gemma3-1b"]))
    assert (h.sliding_window, h.n_ctx_train) == (512, 32768)
    assert h.swa_layers == tuple(i % 6 < 5 for i in range(26))
    assert (h.n_expert, h.n_expert_used, h.n_ff_expert) == (None, None, None)


def test_qwen3moe_like_expert_properties(tmp_path: Path) -> None:
    h = read_gguf_header(write_shaped_gguf(tmp_path / "qwen3moe.gguf", GOOD_SHAPES["qwen3moe"]))
    assert (h.n_expert, h.n_expert_used, h.n_ff_expert) == (128, 8, 768)
    assert h.tensor("blk.0.ffn_gate_exps.weight").shape[-1] == 128
    per_layer = read_gguf_header(write_shaped_gguf(tmp_path / "ds.gguf", GOOD_SHAPES["dense-first-layer"]))
    assert (per_layer.n_expert, per_layer.n_expert_used) == (64, (0, 6, 6, 6))


@pytest.mark.parametrize("case", HPARAM_CASES, ids=[c.id for c in HPARAM_CASES])
def test_absurd_hyperparameter_is_refused(case: HparamCase, tmp_path: Path) -> None:
    path = write_shaped_gguf(tmp_path / f"{case.id}.gguf", GOOD_SHAPES[case.shape], case.change)
    with pytest.raises(InvalidModelFile) as info:
        read_gguf_header(path)
    assert case.expect in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


def test_every_truncation_of_the_header_is_refused(valid_gguf: Path, valid_layout: Layout, tmp_path: Path) -> None:
    data = valid_gguf.read_bytes()
    cuts = list(range(0, 200)) + list(range(200, valid_layout.data_offset + 64, 89))
    path = tmp_path / "cut.gguf"
    for cut in cuts:
        path.write_bytes(data[:cut])
        with pytest.raises(InvalidModelFile, match="truncated|too short|ends inside"):
            read_gguf_header(path)


def test_random_byte_flips_give_a_header_or_one_clear_error(valid_gguf: Path, valid_layout: Layout, tmp_path: Path) -> None:
    data = valid_gguf.read_bytes()
    rng = random.Random(1234)
    path = tmp_path / "flip.gguf"
    start = time.perf_counter()
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(valid_layout.data_offset)] = rng.randrange(256)
        path.write_bytes(mutated)
        try:
            read_gguf_header(path)
        except InvalidModelFile as exc:
            assert str(exc).startswith(f"{path}: ")
    assert time.perf_counter() - start < 60


def test_header_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.gguf"
    path.write_bytes(gguf_file([kv("general.name", 8, gstr("x" * (3 << 20)))], []))
    with pytest.raises(InvalidModelFile, match="header too large"):
        read_gguf_header(path, max_header_bytes=2 << 20)
    assert len(read_gguf_header(path).name) == 3 << 20


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidModelFile, match="no such file"):
        read_gguf_header(tmp_path / "nope.gguf")


def test_byte_source_is_left_open_for_its_owner(valid_gguf: Path) -> None:
    with FileByteSource(valid_gguf) as source:
        h = read_gguf_header(source)
        assert source.read(0, 4) == b"GGUF"
    assert source.bytes_fetched >= h.data_offset

"""The tiny architecture families (tests/fixtures/tiny_families.py): what their files hold, and what
llama.cpp makes of them: each loads, says its architecture, sizes its caches as real models of the family
(gemma3's sliding-window cache, phi3's ignored window) and generates."""

from __future__ import annotations

import logging
import re
from itertools import islice
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from engine.gguf.log_bridge import LlamaLogBridge
from models.formats.gguf_header import GgufHeader, read_gguf_header
from tests.fixtures.tiny_families import (
    FAMILIES,
    QUANTS,
    SPECS,
    corpus,
    kept_llama_log,
    llama_log_lines,
    padded_tokenizer,
    quantize_family,
)
from tests.fixtures.tiny_family_tensors import FamilySpec, family_tensors
from tests.fixtures.tiny_gguf import Tokenizer, borrow_tokenizer

# The type most weights get at each quant (llama-quant.cpp's default type for the file type)
MAIN_TYPE = {"f16": "F16", "q8_0": "Q8_0", "q6_k": "Q6_K", "q4_k_m": "Q4_K", "iq4_xs": "IQ4_XS"}
# Every type llama.cpp's mix gives a weight whose rows fit the type's blocks. The fallbacks for rows that
# do not (Q5_0 for Q4_K, Q8_0 for Q6_K, IQ4_NL for IQ4_XS) are none of them.
MIX = {
    "f16": {"F16"},
    "q8_0": {"Q8_0"},
    "q6_k": {"Q6_K"},
    "q4_k_m": {"Q4_K", "Q5_K", "Q6_K"},  # Q5_K: Mixtral's attn_output
    "iq4_xs": {"IQ4_XS", "Q5_K", "Q6_K"},  # Q5_K: attn_v where GQA >= 4, the first ffn_down
}
# llama.cpp gives 8-expert (Mixtral) models Q8_0 attn_k and attn_v whatever the quant
EIGHT_EXPERT_KV = {"Q8_0"}
SUPER_BLOCK = 256  # the values in one block of every K-quant and IQ4_XS


@pytest.fixture(scope="session")
def borrowed(starter_model: Path) -> Tokenizer:
    return borrow_tokenizer(starter_model)


@pytest.fixture(scope="session")
def corpus_dir(family_corpus_dir: Path) -> Path:
    return family_corpus_dir  # shared with the forecast's tests (tests/conftest.py): built once


@pytest.fixture(scope="session")
def files(family_corpus: dict[str, Path]) -> dict[str, Path]:
    return family_corpus


@pytest.fixture(scope="session")
def headers(files: dict[str, Path]) -> dict[str, GgufHeader]:
    return {name: read_gguf_header(path) for name, path in files.items()}


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def llama_log():
    """llama.cpp's log through the engine's bridge: (bridge, lines); the previous callback is put back."""
    handler = LogLines()
    logger = logging.getLogger("tests.tiny_families.llama")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    with kept_llama_log():
        yield LlamaLogBridge(logger), handler.lines
    logger.removeHandler(handler)
    logger.propagate = True


def load(path: Path, **kwargs) -> None:
    llm = llama_cpp.Llama(str(path), n_ctx=2048, verbose=False, **kwargs)
    llm.close()


def kv_caches(lines: list[str]) -> list[tuple[int, int]]:
    """(cells, layers) of each KV cache llama.cpp made, in order."""
    sizes = (re.search(r"llama_kv_cache: size = .*\(\s*(\d+) cells,\s*(\d+) layers", line) for line in lines)
    return [(int(m[1]), int(m[2])) for m in sizes if m]


def is_plain(name: str, n_dims: int) -> bool:
    """Tensors llama.cpp (and the converter) keep in F32: 1-D ones, norms, biases, the expert router."""
    return n_dims == 1 or name.endswith(("_norm.weight", ".bias")) or "ffn_gate_inp" in name


def test_the_corpus_holds_every_family_at_every_quant_and_reuses_what_it_made(
    files: dict[str, Path], corpus_dir: Path, borrowed: Tokenizer
):
    assert set(files) == {f"{f}-{q}" for f in FAMILIES for q in QUANTS}
    assert {"llama", "qwen2", "qwen3", "gemma3", "phi3", "qwen3moe", "mixtral"} <= set(FAMILIES)
    made = {name: path.stat().st_mtime_ns for name, path in files.items()}
    again = corpus(corpus_dir, borrowed)
    assert again == files
    assert {name: path.stat().st_mtime_ns for name, path in again.items()} == made


@pytest.mark.parametrize("family", FAMILIES)
def test_every_quant_has_the_family_metadata_and_tensors(family: str, headers, borrowed: Tokenizer):
    spec = SPECS[family]
    planned = [t.name for t in family_tensors(spec, spec.n_vocab or len(borrowed.tokens))]
    for quant, ftype in QUANTS.items():
        h = headers[f"{family}-{quant}"]
        assert h.architecture == spec.arch
        assert h.file_type == getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
        assert (h.n_layers, h.n_embd, h.n_heads, h.n_kv_heads) == (
            spec.n_layers, spec.n_embd, spec.n_heads, spec.n_kv_heads)
        assert (h.head_dim_k, h.head_dim_v) == (spec.head_dim, spec.head_dim)
        assert h.n_vocab == (spec.n_vocab or len(borrowed.tokens))
        assert sorted(t.name for t in h.tensors) == sorted(planned)
        assert (h.n_expert or 0, h.n_expert_used or 0) == (spec.n_expert, spec.n_expert_used)
        assert h.n_ff_expert == spec.n_ff_expert


def test_quants_made_from_the_q6_k_file_are_those_made_from_f16(files, tmp_path: Path):
    for quant in ("q4_k_m", "iq4_xs"):
        with llama_log_lines():
            direct = quantize_family(files["qwen2-f16"], tmp_path / f"{quant}.gguf", QUANTS[quant])
        made, expected = read_gguf_header(files[f"qwen2-{quant}"]), read_gguf_header(direct)
        assert [(t.name, t.type_name, t.shape, t.nbytes) for t in made.tensors] == [
            (t.name, t.type_name, t.shape, t.nbytes) for t in expected.tensors]
        assert made.metadata == expected.metadata
        assert made.file_size == expected.file_size


def test_gemma3_has_its_window_pattern_tied_output_and_full_vocabulary(headers):
    h = headers["gemma3-q4_k_m"]
    assert h.sliding_window == 512
    # llama.cpp's own gemma3 pattern: the last of every 6 layers attends to everything
    assert h.swa_layers == (True, True, True, True, True, False)
    assert "gemma3.attention.sliding_window_pattern" not in h.metadata  # as the converter writes it
    assert h.metadata["gemma3.rope.freq_base_swa"] == 10000.0
    assert h.n_vocab == 262_144
    assert "output.weight" not in {t.name for t in h.tensors}
    assert {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"} <= {t.name for t in h.tensors}


@pytest.mark.parametrize("name", [f"{f}-{q}" for f in FAMILIES for q in QUANTS])
def test_tensor_types_are_llama_cpps_mix_for_the_quant(name: str, headers):
    family, quant = name.rsplit("-", 1)
    spec, h = SPECS[family], headers[name]
    for t in h.tensors:
        if is_plain(t.name, len(t.shape)):
            assert t.type_name == "F32", t.name
            continue
        allowed = MIX[quant] | (EIGHT_EXPERT_KV if spec.n_expert == 8 and ".attn_" in t.name else set())
        assert t.type_name in allowed, f"{t.name} is {t.type_name}"
        assert t.shape[0] % SUPER_BLOCK == 0, f"{t.name}: rows of {t.shape[0]}"
    main = "blk.0.attn_qkv.weight" if spec.fused_qkv else "blk.0.attn_q.weight"
    assert h.tensor(main).type_name == MAIN_TYPE[quant]
    if quant == "q4_k_m":
        # the output layer (the embedding, when tied) at Q6_K, and ffn_down at Q6_K in some layers only
        output = "token_embd.weight" if spec.tied_output else "output.weight"
        assert h.tensor(output).type_name == "Q6_K"
        down = {h.tensor(f"blk.{i}.ffn_down{'_exps' if spec.n_expert else ''}.weight").type_name
                for i in range(spec.n_layers)}
        assert down == {"Q4_K", "Q6_K"}


@pytest.mark.parametrize("family", FAMILIES)
def test_llama_cpp_loads_every_quant_with_the_familys_caches(family: str, files, headers, llama_log):
    bridge, lines = llama_log
    spec = SPECS[family]
    for quant in QUANTS:
        bridge.reset_buffers()
        lines.clear()
        load(files[f"{family}-{quant}"])
        sizes = bridge.buffers
        assert min(sizes.total("weights"), sizes.total("kv"), sizes.total("compute")) > 0, quant
        assert any(re.fullmatch(rf"print_info: arch\s+= {spec.arch}", line) for line in lines)
        assert any(re.fullmatch(rf"print_info: n_vocab\s+= {headers[f'{family}-{quant}'].n_vocab}", line)
                   for line in lines)
        iswa = [line for line in lines if line.startswith("llama_kv_cache_iswa:")]
        if family == "gemma3":
            # full-size SWA cache (llama.cpp's default): both caches hold the whole context
            assert any("creating non-SWA KV cache, size = 2048 cells" in line for line in iswa)
            assert any("creating     SWA KV cache, size = 2048 cells" in line for line in iswa)
            assert kv_caches(lines) == [(2048, 1), (2048, 5)]
        else:
            # phi3's header has a window too, which llama.cpp ignores: one cache for all layers
            assert iswa == []
            assert kv_caches(lines) == [(2048, spec.n_layers)]


def test_gemma3_without_the_full_size_swa_cache_keeps_only_the_window(files, llama_log):
    _, lines = llama_log
    load(files["gemma3-q4_k_m"], swa_full=False)
    assert any("creating     SWA KV cache, size = 1024 cells" in line for line in lines)  # window + ubatch
    assert kv_caches(lines) == [(2048, 1), (1024, 5)]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_generates(family: str, files):
    # logits_all: llama-cpp-python fills `scores` only then; without it the array is never written and
    # holds whatever the allocator left (a test reading it failed by chance)
    llm = llama_cpp.Llama(str(files[f"{family}-q4_k_m"]), n_ctx=2048, logits_all=True, verbose=False)
    try:
        prompt = llm.tokenize(b"The capital of France is")
        generation = llm.generate(prompt, temp=0.0)
        tokens = list(islice(generation, 2))
        generation.close()
        assert len(tokens) == 2 and all(0 <= t < llm.n_vocab() for t in tokens)
        assert np.isfinite(llm.scores[llm.n_tokens - 1]).all()
    finally:
        llm.close()


def test_a_family_whose_rows_do_not_fit_the_k_quant_blocks_is_refused(tmp_path: Path, borrowed: Tokenizer):
    narrow = FamilySpec(
        arch="qwen2", name="Too narrow", n_layers=1, n_embd=128, n_heads=2, n_kv_heads=1, head_dim=64,
        n_ff=256, n_ctx_train=2048, rope_freq_base=10000.0, tied_output=True,
    )
    with pytest.raises(ValueError, match=r"fell back.*blk\.0\.attn_q\.weight"):
        corpus(tmp_path, borrowed, specs={"narrow": narrow})
    assert list(tmp_path.glob("*/*.gguf")) == []


def test_padding_the_vocabulary_adds_unique_unused_tokens(borrowed: Tokenizer):
    padded = padded_tokenizer(borrowed, len(borrowed.tokens) + 1000)
    assert len(set(padded.tokens)) == len(padded.tokens) == len(borrowed.tokens) + 1000
    assert padded.token_types[len(borrowed.tokens):] == [llama_cpp.LLAMA_TOKEN_TYPE_UNUSED] * 1000
    with pytest.raises(ValueError, match="smaller than the borrowed vocabulary"):
        padded_tokenizer(borrowed, 10)

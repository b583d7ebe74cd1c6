"""engine/gguf/llama_*.py: llama-cpp-python behind three small files, a load made as `llama_cpp.Llama` made it,
and the context created once with the sequence ids it needs."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path

import llama_cpp
import pytest

from engine.gguf.backend import GgufBackend
from engine.gguf.llama_handle import MAX_DEVICES, LlamaHandle, LlamaSettings
from engine.gguf.log_bridge import LlamaLogBridge
from engine.gguf.sampling import make_sampler
from engine.protocol import LoadRequest, SamplingParams
from tests.fixtures.tiny_families import SPECS, write_family
from tests.fixtures.tiny_gguf import borrow_tokenizer
from tests.paths import REPO

ENGINE = REPO / "engine"
# llama-cpp-python's private parts: the attributes of its Llama and its private modules. An object's
# own attributes of those names (`self._model`) are its own business.
PRIVATE = re.compile(r"(?<!self)\._(ctx|model|batch|stack)\b|\b_internals\b|\b_ggml\b")
IMPORT = re.compile(r"\s*(import|from)\s+llama_cpp\b")
SETTINGS = LlamaSettings(n_ctx=2048, n_threads=2, n_batch=512, tensor_split=(0.6, 0.4), flash_attn=True,
                         swa_full=False, kv_type=8)


def offences(root: Path) -> list[str]:
    """Lines under `root` (an engine/ tree) outside engine/gguf/llama_*.py that import or reach into llama-cpp-python."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.parent == root / "gguf" and path.name.startswith("llama_"):  # the boundary's own files
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line) or IMPORT.match(line):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_only_the_llama_files_touch_llama_cpp_python():
    assert offences(ENGINE) == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path):
    (tmp_path / "gguf").mkdir()
    (tmp_path / "gguf" / "llama_handle.py").write_text("import llama_cpp\nx = llm._ctx.ctx\n")
    (tmp_path / "gguf" / "other.py").write_text(
        "from llama_cpp import _internals\n"
        "    import llama_cpp\n"
        "n = llama_cpp.llama_n_ctx(llm._ctx.ctx)\n"
        "v = llm._model.vocab\n"
        "llm._batch.set_batch([1], 0, False)\n"
        "llm._stack.close()\n"
        "self._model = {}  # an object's own attribute\n"
        "# llama_cpp is loaded only in the engine process\n"
    )
    assert [line.split(":")[1] for line in offences(tmp_path)] == ["1", "2", "3", "4", "5", "6"]


def _scalars(params) -> dict[str, object]:
    """The plain fields of a ctypes parameter struct (not its pointers and callbacks)."""
    values = {name: getattr(params, name) for name, _ in params._fields_}
    return {k: v for k, v in values.items() if isinstance(v, int | float | bool)}


def test_a_load_asks_llama_cpp_what_llama_cpp_python_asked(starter_model: Path):
    """The parameters `llama_cpp.Llama` gave the engine before, but the sequence ids."""
    llm = llama_cpp.Llama(str(starter_model), n_ctx=2048, n_threads=2, n_batch=512, tensor_split=[0.6, 0.4],
                          flash_attn=True, swa_full=False, type_k=8, type_v=8, verbose=False)
    one = LlamaHandle(starter_model, SETTINGS, lambda: None)
    try:
        assert _scalars(one.context_params) == _scalars(llm.context_params)
        assert _scalars(one.model_params) == _scalars(llm.model_params)
        split = [one.model_params.tensor_split[i] for i in range(MAX_DEVICES)]
        assert split == [llm.model_params.tensor_split[i] for i in range(MAX_DEVICES)]
        assert one.metadata == llm.metadata
        assert (one.n_ctx, one.n_batch, one.n_vocab, one.bos, one.eos, one.n_seq) == (
            llm.n_ctx(), llm.n_batch, llm.n_vocab(), llm.token_bos(), llm.token_eos(), 1)
    finally:
        one.close()
        llm.close()
    several = LlamaHandle(starter_model, replace(SETTINGS, n_seq=5), lambda: None)
    try:
        assert several.n_seq == 5 == llama_cpp.llama_n_seq_max(several.context_pointer)
        asked = _scalars(several.context_params)
        assert (asked.pop("n_seq_max"), asked.pop("kv_unified")) == (5, True)  # one cache for all of them
        assert asked == {k: v for k, v in _scalars(one.context_params).items() if k not in ("n_seq_max", "kv_unified")}
    finally:
        several.close()
        several.close()  # a second close is a no-op


def test_tokens_read_as_llama_cpp_python_read_them_and_long_pieces_whole(starter_model: Path):
    llm = llama_cpp.Llama(str(starter_model), n_ctx=256, verbose=False)
    llama = LlamaHandle(starter_model, LlamaSettings(n_ctx=256, n_threads=2), lambda: None)
    try:
        texts = [b"Hello <|im_start|>user\nworld", b"", "\u00fcn\u00efc\u00f8d\u00e9 \u2713".encode(), b"  x   " * 300]
        for text in texts:
            for add_bos in (True, False):
                for special in (True, False):
                    assert llama.tokenize(text, add_bos, special) == llm.tokenize(text, add_bos, special)
        long_pieces = 0
        for token in range(llama.n_vocab):
            for special in (False, True):
                piece = llama.detokenize([token], special)
                if len(piece) > 32:  # llama-cpp-python's 32-byte buffer gave nothing for these
                    long_pieces += 1
                    assert llm.detokenize([token], special=special) == b""
                else:
                    assert piece == llm.detokenize([token], special=special)
        assert long_pieces > 0
        code = b"def f():\n" + b" " * 40 + b"return 1\n"  # deep indentation is one long token
        assert llama.detokenize(llama.tokenize(code, False, False)) == code
    finally:
        llama.close()
        llm.close()


def _sampled(llama, sample, prompt: list[int], n: int = 24) -> list[int]:
    """`n` tokens drawn after `prompt` in sequence 0, each decoded before the next is drawn."""
    llama.seq_rm(-1, -1, -1)
    assert llama.decode(prompt, 0) == 0
    tokens = []
    for i in range(n):
        tokens.append(sample())
        assert llama.decode(tokens[-1:], len(prompt) + i) == 0
    return tokens


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.0), SamplingParams(temperature=0.9, seed=7),
                                    SamplingParams(temperature=1.3, top_k=0, top_p=0.8, seed=3)])
def test_the_sampler_chain_draws_what_llama_cpp_python_s_drew(starter_model: Path, params: SamplingParams):
    """The same samplers in the same order with the same seed: the same tokens, token for token."""
    from llama_cpp._internals import LlamaSampler  # what sampling.py built before

    llama = LlamaHandle(starter_model, LlamaSettings(n_ctx=512, n_threads=2), lambda: None)
    try:
        prompt = llama.tokenize(b"Once upon a time, in a land far away,", True, False)
        ours = make_sampler(params)
        theirs = LlamaSampler()
        if params.temperature <= 0:
            theirs.add_greedy()
        else:
            if params.top_k > 0:
                theirs.add_top_k(params.top_k)
            theirs.add_top_p(params.top_p, 1)
            theirs.add_min_p(0.05, 1)
            theirs.add_temp(params.temperature)
            theirs.add_dist(params.seed)
        context = type("Context", (), {"ctx": llama.context_pointer})
        drawn = _sampled(llama, lambda: ours.sample(llama), prompt)
        assert drawn == _sampled(llama, lambda: theirs.sample(context, -1), prompt)
        assert len(set(drawn)) > 3  # a real reply, not one token over and over
        ours.close()
        ours.close()
        theirs.close()
    finally:
        llama.close()


@pytest.fixture(scope="module")
def sliding_window_model(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3's layout (a 512-token window on most layers) with the starter model's small vocabulary."""
    spec = replace(SPECS["gemma3"], n_vocab=None)
    return write_family(tmp_path_factory.mktemp("swa") / "gemma3.gguf", spec, borrow_tokenizer(starter_model))


def test_the_backend_asks_for_the_sequences_each_model_can_use(backend: GgufBackend, starter_model: Path,
                                                                  sliding_window_model: Path):
    # A live sequence per reply slot (4 by default), and 4 to park pinned prompts in
    backend.load(LoadRequest(str(starter_model), n_ctx=1024))
    assert backend._llama.n_seq == 8 and backend._llama.context_params.kv_unified
    assert backend._prefixes.seqs.slots == 4 == backend.free_slots
    backend.load(LoadRequest(str(starter_model), n_ctx=1024, n_parallel=1))
    assert backend._llama.n_seq == 5 and backend.free_slots == 1
    backend.load(LoadRequest(str(starter_model), n_ctx=1024, prefix_cache_bytes=0, n_parallel=1))  # nothing to park
    assert backend._llama.n_seq == 1
    backend.load(LoadRequest(str(starter_model), n_ctx=1024, prefix_cache_bytes=0))
    assert backend._llama.n_seq == 4
    # A sliding-window cache drops cells other sequences would share: the live sequence alone.
    backend.load(LoadRequest(str(sliding_window_model), n_ctx=1024))
    assert backend._llama.n_seq == 1 == llama_cpp.llama_n_seq_max(backend._llama.context_pointer)
    assert not backend._llama.context_params.kv_unified
    assert backend.free_slots == 1  # one reply at a time


def test_sequences_llama_cpp_refuses_fall_back_to_one_with_that_context_s_buffers(starter_model: Path):
    quiet = logging.getLogger("tests.llama_handle")
    quiet.setLevel(logging.CRITICAL)
    bridge = LlamaLogBridge(quiet)
    refused = []
    too_many = llama_cpp.llama_max_parallel_sequences() + 1
    llama = LlamaHandle(starter_model, replace(SETTINGS, n_seq=too_many),
                       lambda: (refused.append(True), bridge.buffers.forget("kv", "compute")))
    llama.close()
    after_refusal = bridge.buffers.by_kind
    bridge.reset_buffers()
    LlamaHandle(starter_model, SETTINGS, lambda: None).close()
    assert refused == [True] and llama.n_seq == 1
    assert after_refusal == bridge.buffers.by_kind and set(after_refusal) == {"weights", "kv", "compute"}

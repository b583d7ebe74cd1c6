"""models/formats/ggml_types.py against the llama.cpp installed here: the tables must know what it knows.

The truth is the C library itself, not llama-cpp-python's Python constants (which can lag the C
enums): libggml's type traits through ggml_type_name / ggml_blck_size / ggml_type_size, and
libllama's llama_ftype_name. A llama.cpp upgrade that adds a type our tables lack, or changes a
block layout, fails here instead of refusing users' files as "unknown ggml type".
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import llama_cpp
import pytest
from llama_cpp import _ggml

from models.formats.ggml_types import FILE_TYPES, GGML_TYPES
from models.formats.gguf_header import read_gguf_header
from tests.fixtures.hub_repos import quantize
from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama

# llama_ftype_name's answer for an id the library does not know (llama-model-loader.cpp).
UNKNOWN_FTYPE = b"unknown, may not work"
LLAMA_FTYPE_GUESSED = 1024  # a flag on top of the real ids, never stored in a file
Q2_0_ID, Q2_0_FTYPE = 42, 41  # the newest type and file type when this test was written


def _installed_header(name: str) -> str | None:
    """A C header installed with this llama-cpp-python build (site-packages/include), if any."""
    path = Path(llama_cpp.__file__).parent.parent / "include" / name
    return path.read_text() if path.is_file() else None


def _enum_values(source: str, pattern: str) -> dict[str, int]:
    """Enum members matching `pattern` (one group: the name) and their values, comments skipped."""
    found: dict[str, int] = {}
    for line in source.splitlines():
        m = re.match(rf"\s*{pattern}\s*=\s*(\d+)", line)  # a commented-out (removed) member starts with //
        if m:
            found[m.group(1)] = int(m.group(2))
    return found


def _ggml_type_count() -> int:
    """GGML_TYPE_COUNT of the installed build: from its ggml.h, else llama-cpp-python's constant.

    Never more than the real count: ggml indexes its traits table without a bounds check.
    """
    header = _installed_header("ggml.h")
    if header is not None:
        return _enum_values(header, r"(GGML_TYPE_COUNT)")["GGML_TYPE_COUNT"]
    return int(llama_cpp.GGML_TYPE_COUNT)


def _libggml_types() -> dict[int, tuple[str, int, int]]:
    """Type id -> (name, block size, type size) from libggml, the ids it marks removed left out."""
    lib = _ggml.libggml  # libggml's dependency libggml-base defines these; dlsym finds them through it
    name, blck, size = lib.ggml_type_name, lib.ggml_blck_size, lib.ggml_type_size
    for fn, restype in ((name, ctypes.c_char_p), (blck, ctypes.c_int64), (size, ctypes.c_size_t)):
        fn.argtypes, fn.restype = [ctypes.c_int], restype
    types = {}
    for i in range(_ggml_type_count()):
        # Removed ids keep a slot in the traits table with block size 0 and a name such as
        # "DEPRECATED" or "TYPE_Q4_0_4_4 REMOVED, ...": gguf refuses tensors of those types.
        if blck(i) == 0:
            continue
        types[i] = (name(i).decode(), int(blck(i)), int(size(i)))
    return types


def test_ggml_types_match_libggml() -> None:
    ggml = _libggml_types()
    assert Q2_0_ID in ggml  # the probe reaches the newest types, not a stale count
    ours = {i: (t.name, t.block_size, t.type_size) for i, t in GGML_TYPES.items()}
    theirs = {i: (n.upper(), b, s) for i, (n, b, s) in ggml.items()}
    missing = {i: theirs[i] for i in theirs.keys() - ours.keys()}
    extra = {i: ours[i] for i in ours.keys() - theirs.keys()}
    differ = {i: (ours[i], theirs[i]) for i in ours.keys() & theirs.keys() if ours[i] != theirs[i]}
    assert not missing, f"ggml types our table lacks (id: name, block, bytes): {missing}"
    assert not extra, f"types in our table that this ggml does not know: {extra}"
    assert not differ, f"types whose layout differs (ours, ggml's): {differ}"


def _ftype_names() -> dict[int, str]:
    """llama_ftype id -> the enum member's name without LLAMA_FTYPE_(MOSTLY|ALL)_.

    From llama-cpp-python's constants, overridden by the installed llama.h, which is the build's.
    """
    pattern = r"(?:LLAMA_FTYPE_MOSTLY_|LLAMA_FTYPE_ALL_)(\w+)"
    names = {int(getattr(llama_cpp, attr)): m.group(1) for attr in dir(llama_cpp) if (m := re.fullmatch(pattern, attr))}
    header = _installed_header("llama.h")
    if header is not None:
        names.update({value: name for name, value in _enum_values(header, pattern).items()})
    return names


def test_file_types_match_libllama() -> None:
    known = {i for i in range(LLAMA_FTYPE_GUESSED) if llama_cpp.llama_ftype_name(i) != UNKNOWN_FTYPE}
    assert Q2_0_FTYPE in known
    names = _ftype_names()
    unnamed = sorted(known - names.keys())
    assert not unnamed, f"ftypes libllama knows that neither llama.h nor llama_cpp names: {unnamed}"
    expected = {i: names[i] for i in sorted(known)}
    missing = {i: n for i, n in expected.items() if i not in FILE_TYPES}
    assert not missing, f"file types our table lacks: {missing}"
    assert expected == FILE_TYPES, "file types our table names differently or llama.cpp no longer knows"


@pytest.fixture(scope="module")
def tiny_f16(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = TinySpec(n_layers=2, n_embd=256, n_heads=4, n_kv_heads=2, n_ff=512)
    return write_tiny_llama(tmp_path_factory.mktemp("q2_0") / "tiny-F16.gguf", spec, borrow_tokenizer(starter_model))


def test_q2_0_file_quantized_by_llama_cpp_is_read(tiny_f16: Path) -> None:
    path = quantize(tiny_f16, tiny_f16.with_name("tiny-Q2_0.gguf"), "Q2_0")
    h = read_gguf_header(path)
    assert (h.file_type, h.quant_name) == (Q2_0_FTYPE, "Q2_0")
    q2 = [t for t in h.tensors if t.type_name == "Q2_0"]
    assert len(q2) == 2 * 7  # every matrix of both blocks (embedding and output get other types)
    assert all(t.ggml_type == Q2_0_ID and t.nbytes == t.shape[0] * t.shape[1] // 64 * 18 for t in q2)
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
    assert model, "llama.cpp could not load the Q2_0 file"
    try:
        assert llama_cpp.llama_model_ftype(model) == Q2_0_FTYPE
        assert llama_cpp.llama_model_size(model) == h.weights_bytes  # llama.cpp's own sum of tensor bytes
    finally:
        llama_cpp.llama_model_free(model)

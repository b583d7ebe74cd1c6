"""Every call into llama-cpp-python, in one file: a loaded model with its context and batch, samplers, the log hook.

llama-cpp-python's `Llama` creates its context with a single sequence id and has no way to ask for
more, so the engine opens llama.cpp through the library's ctypes bindings itself: one small class
per C resource (model, context, batch, sampler chain), each freeing what it holds once, and a
`LlamaHandle` that frees a load's three in reverse order through one ExitStack. No engine file
but these `llama_*` ones imports llama_cpp (tests/engine/gguf/test_llama_handle.py checks), so an upgrade of
llama-cpp-python touches this file alone.

The parameters are those `llama_cpp.Llama(verbose=False)` gave the engine before (the same test
compares them), so a model loads, decodes and logs its buffers as it did.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from engine.gguf.llama_batch import Batch, BatchRow

log = logging.getLogger(__name__)

VERSION = llama_cpp.__version__  # pins llama.cpp's state format: part of every saved prefix's key
MAX_DEVICES = llama_cpp.LLAMA_MAX_DEVICES  # the longest tensor_split llama.cpp takes
DEFAULT_SEED = llama_cpp.LLAMA_DEFAULT_SEED  # llama.cpp draws a seed of its own
_ALL_LAYERS = 0x7FFFFFFF  # n_gpu_layers -1: llama.cpp caps INT32_MAX at the model's layer count
_MAX_UBATCH = 512


class LlamaError(RuntimeError):
    """llama.cpp refused: a model file it could not load, a context it could not create."""


@dataclass(slots=True, frozen=True)
class LlamaSettings:
    """What a load asks of llama.cpp (the engine's LoadRequest, resolved)."""

    n_ctx: int
    n_threads: int
    n_batch: int = 512
    n_gpu_layers: int = 0  # -1: all
    tensor_split: tuple[float, ...] = ()  # empty: llama.cpp's own split
    flash_attn: bool = True
    swa_full: bool = True
    kv_type: int = 1  # ggml type id of the K and V cache (1: f16)
    n_seq: int = 1  # sequence ids wanted; a model whose cells cannot be shared gets one
    # A context that computes pooled vectors (an embedding model's), with llama.cpp's pooling type (-1: the
    # model's own): it takes n_batch tokens in one ubatch, as an encoder must and as pooling needs (a sequence
    # cut over two ubatches would be pooled from its last part only), and writes no logits.
    embeddings: bool = False
    pooling: int = -1


# ---------------------------------------------------------------- the library


def gpu_offload_supported() -> bool:
    return bool(llama_cpp.llama_supports_gpu_offload())


def system_info() -> str:
    """llama.cpp's feature line (which CPU features its build uses)."""
    return llama_cpp.llama_print_system_info().decode(errors="replace")


def library_dir() -> Path:
    """Where llama-cpp-python keeps libllama and ggml's libraries."""
    return Path(llama_cpp.__file__).parent / "lib"


def ggml_library() -> ctypes.CDLL:
    """The libggml llama-cpp-python loaded (its registry is the one model loading uses)."""
    from llama_cpp import _ggml

    return _ggml.libggml


def install_log_callback(on_log: Callable[[int, bytes, ctypes.c_void_p], None]) -> object:
    """Send llama.cpp's log to `on_log(level, text, user_data)`; the C callback returned must be kept
    alive while installed (llama.cpp keeps one per process and calls it until another is set)."""
    callback = llama_cpp.llama_log_callback(on_log)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    return callback


@functools.cache
def _init_backend() -> None:
    with _quiet_stdio():
        llama_cpp.llama_backend_init()


@contextlib.contextmanager
def _quiet_stdio() -> Iterator[None]:
    """File descriptors 1 and 2 to /dev/null while llama.cpp loads (as Llama(verbose=False) had it):
    what ggml prints there itself, not through the log callback, stays off the user's terminal."""
    for stream in (s for s in (sys.stdout, sys.stderr) if s is not None):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


# ---------------------------------------------------------------- one class per C resource


class _Model:
    """A llama_model loaded from a file, and its vocabulary."""

    def __init__(self, path: str, params: llama_cpp.llama_model_params):
        with _quiet_stdio():
            self.ptr = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), params)
        if not self.ptr:
            raise LlamaError(f"llama.cpp could not load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.ptr)
        if not self.vocab:
            self.close()
            raise LlamaError(f"{path} has no vocabulary")

    def close(self) -> None:
        if self.ptr:
            llama_cpp.llama_model_free(self.ptr)
            self.ptr = None

    def metadata(self) -> dict[str, str]:
        """Every key of the GGUF header, its value as llama.cpp writes it as text."""
        out = {}
        for i in range(llama_cpp.llama_model_meta_count(self.ptr)):
            key = _c_string(llama_cpp.llama_model_meta_key_by_index, self.ptr, i)
            out[key] = _c_string(llama_cpp.llama_model_meta_val_str_by_index, self.ptr, i)
        return out

    def trims_tail(self) -> bool:
        """Whether a sequence's latest positions can be dropped again (rejected speculative drafts):
        not where the model keeps one recurrent state per sequence."""
        p = self.ptr
        return not (llama_cpp.llama_model_is_recurrent(p) or llama_cpp.llama_model_is_hybrid(p))

    def shares_cells(self) -> bool:
        """Whether sequences of one KV cache can share and trim cells freely: recurrent and hybrid models
        hold one state per sequence, and a sliding-window cache drops old cells."""
        p = self.ptr
        return not (llama_cpp.llama_model_is_recurrent(p) or llama_cpp.llama_model_is_hybrid(p)
                    or llama_cpp.llama_model_n_swa(p) > 0)


def _c_string(read, model, index: int) -> str:
    """A string llama.cpp writes into a buffer, snprintf-style (it returns the length it needed)."""
    buf = ctypes.create_string_buffer(1024)
    n = read(model, index, buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        read(model, index, buf, len(buf))
    return buf.value.decode("utf-8", errors="replace")


class _Context:
    """A llama_context over a model (its KV cache), and its memory handle."""

    def __init__(self, model: _Model, params: llama_cpp.llama_context_params):
        self.ptr = llama_cpp.llama_init_from_model(model.ptr, params)
        if not self.ptr:
            raise LlamaError("llama.cpp could not create a context")
        self.memory = llama_cpp.llama_get_memory(self.ptr)

    def close(self) -> None:
        if self.ptr:
            llama_cpp.llama_free(self.ptr)
            self.ptr = self.memory = None


def _model_params(
    settings: LlamaSettings, on_progress: Callable[[float], bool] | None = None
) -> tuple[llama_cpp.llama_model_params, tuple[object, ...]]:
    """The model parameters, and the C objects they point to (kept alive with them): the split, the callback."""
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = _ALL_LAYERS if settings.n_gpu_layers == -1 else settings.n_gpu_layers
    params.split_mode = llama_cpp.LLAMA_SPLIT_MODE_LAYER
    params.main_gpu = 0
    params.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP
    split = (ctypes.c_float * MAX_DEVICES)(*settings.tensor_split) if settings.tensor_split else None
    if split is not None:  # the devices past the split get 0
        params.tensor_split = split
    callback = None
    if on_progress is not None:  # llama.cpp calls it per tensor read (its share of the bytes) and at the end
        callback = llama_cpp.llama_progress_callback(lambda fraction, _data: _go_on(on_progress, fraction))
        params.progress_callback = callback
    return params, (split, callback)


def _go_on(on_progress: Callable[[float], bool], fraction: float) -> bool:
    """Whether the load goes on; False makes llama.cpp free what it read and return no model. A failure to
    report is logged, not a reason to stop (an exception in a ctypes callback would read as False)."""
    try:
        return bool(on_progress(float(fraction)))
    except Exception:  # noqa: BLE001 - see above
        log.exception("reporting load progress failed")
        return True


def _context_params(settings: LlamaSettings, n_seq: int) -> llama_cpp.llama_context_params:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = settings.n_ctx
    params.n_batch = settings.n_batch
    params.n_ubatch = settings.n_batch if settings.embeddings else min(settings.n_batch, _MAX_UBATCH)
    params.n_threads = settings.n_threads
    params.n_threads_batch = os.cpu_count() or 1  # prefill uses every core, as it did
    # Where llama-cpp-python's values differ from llama.cpp's defaults, the engine keeps its old ones.
    params.yarn_attn_factor, params.yarn_beta_fast, params.yarn_beta_slow = 1.0, 32.0, 1.0
    params.no_perf = False
    params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn
                              else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    params.swa_full = settings.swa_full
    params.type_k = params.type_v = settings.kv_type
    # Several sequences share one cache of n_ctx cells (kv_sequences.py): a unified KV cache.
    params.n_seq_max = n_seq
    params.kv_unified = n_seq > 1
    if settings.embeddings:
        params.embeddings, params.pooling_type = True, settings.pooling
    return params


class LlamaHandle:
    """One loaded model, its context and its batch; close() frees all three.

    Loads `path` and creates its context and batch; LlamaError (or OSError) if llama.cpp cannot.
    `on_context_refused` is called after each context llama.cpp would not create, before the next
    try with one sequence (the log bridge forgets the buffers it logged for the refused one).
    `on_progress(fraction)` hears how far the weights are read; its False stops the load (LlamaError).
    Sequence ids, positions and cells are llama.cpp's (kv_sequences.py keeps the books of them).
    """

    def __init__(self, path: Path, settings: LlamaSettings, on_context_refused: Callable[[], None],
                 on_progress: Callable[[float], bool] | None = None):
        _init_backend()
        self._stack = contextlib.ExitStack()
        self._closer = weakref.finalize(self, self._stack.close)  # a handle dropped unclosed frees too
        self._closer.atexit = False  # at exit the OS frees it; CUDA may be gone by then
        try:
            self.model_params, self._params_refs = _model_params(settings, on_progress)
            self.tensor_split = list(settings.tensor_split) or None
            self._model = self._stack.enter_context(contextlib.closing(_Model(str(path), self.model_params)))
            self._context, self.n_seq = self._open_context(settings, on_context_refused)
            self.n_batch = settings.n_batch
            self._batch = self._stack.enter_context(contextlib.closing(Batch(self.n_batch)))
        except BaseException:
            self.close()
            raise
        m = self._model.ptr
        self.n_ctx = int(llama_cpp.llama_n_ctx(self._context.ptr))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(m))
        self.n_params = int(llama_cpp.llama_model_n_params(m))
        self.size_bytes = int(llama_cpp.llama_model_size(m))
        self.n_swa = int(llama_cpp.llama_model_n_swa(m))
        self.n_layer = int(llama_cpp.llama_model_n_layer(m))
        self.trims_tail = self._model.trims_tail()  # speculative drafts can be verified (and dropped)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._model.vocab))
        self.n_embd_out = int(llama_cpp.llama_model_n_embd_out(m))  # the width of its vectors (embeddings)
        self.bos = int(llama_cpp.llama_vocab_bos(self._model.vocab))
        self.eos = int(llama_cpp.llama_vocab_eos(self._model.vocab))
        self.metadata = self._model.metadata()

    def _open_context(self, settings: LlamaSettings, on_refused: Callable[[], None]) -> tuple[_Context, int]:
        """The context with the sequence ids asked for, else one (llama.cpp may refuse several)."""
        wanted = settings.n_seq if settings.n_seq > 1 and self._model.shares_cells() else 1
        for n_seq in dict.fromkeys((wanted, 1)):
            self.context_params = _context_params(settings, n_seq)
            try:
                context = _Context(self._model, self.context_params)
            except LlamaError:
                log.warning("llama.cpp could not create a context with %d sequences", n_seq)
                on_refused()  # llama.cpp logs the next try's buffer sizes anew
                continue
            return self._stack.enter_context(contextlib.closing(context)), n_seq
        raise LlamaError("llama.cpp could not create a context for the model")

    def close(self) -> None:
        self._closer()

    def set_threads(self, threads: int) -> None:
        """Decode and prefill on at most `threads` threads (each back to its own count when there is room)."""
        params = self.context_params
        llama_cpp.llama_set_n_threads(self._context.ptr, min(threads, params.n_threads),
                                      min(threads, params.n_threads_batch))

    # The raw llama_context and llama_model, for tests and benches that ask llama.cpp directly.
    @property
    def context_pointer(self) -> llama_cpp.llama_context_p:
        return self._context.ptr

    @property
    def vocab_pointer(self) -> llama_cpp.llama_vocab_p:
        return self._model.vocab

    @property
    def model_pointer(self) -> llama_cpp.llama_model_p:
        return self._model.ptr

    # ------------------------------------------------------------ tokens

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
        room = len(text) + 2
        for _ in range(2):
            tokens = (llama_cpp.llama_token * room)()
            n = llama_cpp.llama_tokenize(self._model.vocab, text, len(text), tokens, room, add_bos, special)
            if n >= 0:
                return list(tokens[:n])
            room = -n  # more tokens than bytes (added specials): llama.cpp says how many
        raise LlamaError(f"llama.cpp could not tokenize {len(text)} bytes")

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> bytes:
        """The bytes of `tokens` (a piece may end inside a UTF-8 character)."""
        out = bytearray()
        buf = ctypes.create_string_buffer(64)
        for token in tokens:
            n = llama_cpp.llama_token_to_piece(self._model.vocab, token, buf, len(buf), 0, special)
            if n < 0:  # a longer piece: llama.cpp says its length
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(self._model.vocab, token, buf, len(buf), 0, special)
            out += ctypes.string_at(buf, n)
        if tokens and tokens[0] == self.bos and out[:1] == b" ":
            del out[0]  # SentencePiece's space after BOS, which llama-cpp-python dropped too
        return bytes(out)

    def is_end_of_generation(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._model.vocab, token))

    # ------------------------------------------------------------ the KV cache

    def decode(self, tokens: Sequence[int], first_pos: int, seq_id: int = 0) -> int:
        """Evaluate up to n_batch tokens of one sequence; llama_decode's code (0 ok, 1 no free cells)."""
        self._batch.fill(tokens, first_pos, seq_id)
        return int(llama_cpp.llama_decode(self._context.ptr, self._batch.batch))

    def decode_rows(self, rows: Sequence[BatchRow]) -> int:
        """Evaluate up to n_batch tokens of any sequences in one batch; llama_decode's code. The logits of
        the i-th row with `logits` set are sampled as row i (the batch index)."""
        self._batch.fill_rows(rows)
        return int(llama_cpp.llama_decode(self._context.ptr, self._batch.batch))

    def seq_rm(self, seq_id: int, p0: int, p1: int) -> bool:
        """Drop positions [p0, p1) of a sequence (-1: open end, seq_id -1: all); False where it cannot."""
        return bool(llama_cpp.llama_memory_seq_rm(self._context.memory, seq_id, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        """Give the cells of positions [p0, p1) of `src` the sequence id `dst` too (nothing copied)."""
        llama_cpp.llama_memory_seq_cp(self._context.memory, src, dst, p0, p1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._context.memory, True)

    def seq_pos_min(self, seq_id: int) -> int:
        """The lowest position a sequence holds; -1 where it holds none (or the model keeps no KV)."""
        memory = self._context.memory
        return int(llama_cpp.llama_memory_seq_pos_min(memory, seq_id)) if memory else -1

    def seq_pos_max(self, seq_id: int) -> int:
        """The highest position a sequence holds; -1 where it holds none (or the model keeps no KV)."""
        memory = self._context.memory
        return int(llama_cpp.llama_memory_seq_pos_max(memory, seq_id)) if memory else -1

    def save_state(self, seq_id: int) -> bytearray | None:
        """The KV state of one sequence (no logits), or None if llama.cpp could not write it."""
        ctx = self._context.ptr
        size = llama_cpp.llama_state_seq_get_size(ctx, seq_id)
        if size <= 0:
            return None
        buf = bytearray(size)
        written = llama_cpp.llama_state_seq_get_data(ctx, (ctypes.c_uint8 * size).from_buffer(buf), size, seq_id)
        return buf if written == size else None

    def restore_state(self, state: bytearray, seq_id: int) -> bool:
        """Load a saved state into `seq_id` (its cells are replaced); False if llama.cpp refused it."""
        size = len(state)
        ptr = (ctypes.c_uint8 * size).from_buffer(state)
        return llama_cpp.llama_state_seq_set_data(self._context.ptr, ptr, size, seq_id) > 0


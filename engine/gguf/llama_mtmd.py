"""Images and audio through llama.cpp's libmtmd: a model's projector, its media, its prompts with media.

A vision (or audio) model on llama.cpp is the text model plus a projector file (`mmproj-*.gguf`) that
libmtmd opens beside it. The projector turns a prompt whose text holds media markers ("<__media__>"),
and one bitmap per marker, into chunks: runs of text tokens, and image or audio chunks, each a run of
embeddings that takes `n_pos` positions of the sequence. The text chunks are decoded by the model's
own batch (llama_handle.py), the media chunks are encoded by the projector and their embeddings decoded
into the same sequence, so what comes after (sampling, stop strings, the reply loop) is unchanged.

Like llama_handle.py, this is part of the llama-cpp-python boundary (only engine/gguf/llama_*.py import
llama_cpp): one small class per C resource (the mtmd context, a bitmap, a tokenized prompt), each freeing
what it holds once. A projector file is read and checked in Python first (models/formats/
projector_header.py), so that a text model picked by mistake, a projector made for another model or a
file whose values would make llama.cpp abort the process is refused by name before llama.cpp sees it.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import llama_cpp
from llama_cpp import mtmd_cpp as mtmd

from engine.gguf.llama_handle import LlamaError, LlamaHandle
from models.formats.projector_header import ProjectorInfo, check_pairs_with, read_projector_info

log = logging.getLogger(__name__)

DEFAULT_MARKER = mtmd.mtmd_default_marker().decode("utf-8")  # "<__media__>"
_TOKENIZE_ERRORS = {1: "the number of media does not match the markers in the prompt",
                    2: "the projector could not preprocess a media"}


class ProjectorError(LlamaError):
    """llama.cpp refused a projector, a media or a chunk; the message says which and why."""


class NoFreeCells(ProjectorError):
    """llama.cpp found no free KV cells for a chunk (the sequence is left as it was before it)."""


def install_log_callback(on_log: Callable[[int, bytes, ctypes.c_void_p], None]) -> object:
    """Send libmtmd's own log (the projector's load, its buffer sizes, each encode) to `on_log(level, text,
    user_data)`; it is separate from llama.cpp's and goes to stderr until set. The C callback returned must be
    kept alive while installed (libmtmd keeps one per process); reset_log_callback() puts stderr back."""
    callback = llama_cpp.llama_log_callback(on_log)
    mtmd.mtmd_helper_log_set(callback, ctypes.c_void_p(0))  # the helpers' log, and libmtmd's with it
    return callback


def reset_log_callback() -> None:
    """libmtmd's log back to stderr (its default), e.g. before the callback installed is freed."""
    mtmd.mtmd_helper_log_set(llama_cpp.llama_log_callback(), ctypes.c_void_p(0))  # a NULL function pointer


# ---------------------------------------------------------------- media


MediaKind = Literal["image", "audio"]


class Bitmap:
    """An image (RGB bytes) or a clip of audio (float32 PCM) that a prompt's marker stands for; close() frees it.

    `id` travels with the chunks the media becomes (MediaChunk.id): a hash of its content, so the same
    picture twice gives chunks with the same id, and a prefix cache can tell a media it already holds.
    """

    def __init__(self, ptr: mtmd.mtmd_bitmap_p, kind: MediaKind, media_id: str):
        self.ptr = ptr
        self.kind: MediaKind = kind
        self.id = media_id
        mtmd.mtmd_bitmap_set_id(ptr, media_id.encode("ascii"))

    @classmethod
    def image(cls, width: int, height: int, rgb: bytes, media_id: str | None = None) -> Bitmap:
        """An image of `width` × `height` pixels, `rgb` row by row (3 bytes a pixel). `media_id` defaults
        to the SHA-256 (hex) of its size and pixels."""
        if width <= 0 or height <= 0 or width * height * 3 != len(rgb):
            raise ValueError(f"an RGB image of {width} × {height} pixels has {max(width * height * 3, 0)} "
                             f"bytes, not {len(rgb)}")
        data = (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb)  # libmtmd copies it
        ptr = mtmd.mtmd_bitmap_init(width, height, data)
        if not ptr:
            raise ProjectorError(f"llama.cpp could not hold an image of {width} × {height} pixels")
        return cls(ptr, "image", media_id or _sha256(f"{width}x{height}\n".encode(), rgb))

    @classmethod
    def audio(cls, pcm_f32: bytes, media_id: str | None = None) -> Bitmap:
        """Mono audio as little-endian float32 samples at the projector's sample rate. `media_id` defaults to
        the SHA-256 (hex) of its samples."""
        if len(pcm_f32) % 4:
            raise ValueError(f"float32 audio samples take 4 bytes each, not {len(pcm_f32)} bytes in all")
        n = len(pcm_f32) // 4
        if n < 2:  # mtmd_tokenize asserts (aborts the process) on a clip of fewer
            raise ValueError(f"a clip of audio has 2 samples or more, not {n}")
        data = (ctypes.c_float * n).from_buffer_copy(pcm_f32)
        ptr = mtmd.mtmd_bitmap_init_from_audio(n, data)
        if not ptr:
            raise ProjectorError(f"llama.cpp could not hold {n} audio samples")
        return cls(ptr, "audio", media_id or _sha256(b"pcm_f32\n", pcm_f32))

    def close(self) -> None:
        if self.ptr:
            mtmd.mtmd_bitmap_free(self.ptr)
            self.ptr = None


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


# ---------------------------------------------------------------- a prompt, cut into chunks


@dataclass(slots=True, frozen=True)
class TextChunk:
    """Text tokens of the prompt (with the markers the projector puts around and between media)."""

    tokens: tuple[int, ...]

    @property
    def n_pos(self) -> int:
        return len(self.tokens)


@dataclass(slots=True, frozen=True)
class MediaChunk:
    """An image (or one tile of it) or a clip of audio: `n_tokens` embeddings taking `n_pos` positions (fewer
    than its tokens where the model uses M-RoPE); `id` is its Bitmap's."""

    kind: MediaKind
    n_tokens: int
    n_pos: int
    id: str


Chunk = TextChunk | MediaChunk
_KINDS: dict[int, MediaKind] = {mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE: "image", mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO: "audio"}


class Prompt:
    """What mtmd_tokenize made of a prompt: its chunks in order; close() frees them.

    `unknown_tokens` counts the text tokens llama.cpp put in as -1: markers the projector type places around
    its media (idefics3's "<fake_token_around_image>") that the text model's vocabulary lacks, a sign the
    projector was made for another model; evaluate() refuses text chunks holding them before it evaluates anything.
    """

    def __init__(self, ptr: mtmd.mtmd_input_chunks_p, n_vocab: int):
        self.ptr = ptr
        self._pointers = [mtmd.mtmd_input_chunks_get(ptr, i) for i in range(mtmd.mtmd_input_chunks_size(ptr))]
        self.chunks: tuple[Chunk, ...] = tuple(_describe(c) for c in self._pointers)
        self.unknown_tokens = sum(1 for c in self.chunks if isinstance(c, TextChunk)
                                  for t in c.tokens if not 0 <= t < n_vocab)

    @property
    def n_pos(self) -> int:
        """The positions the whole prompt takes in its sequence."""
        return sum(c.n_pos for c in self.chunks)

    def pointer(self, index: int) -> mtmd.mtmd_input_chunk_p:
        if not self.ptr:
            raise ProjectorError("the prompt's chunks were freed")
        return self._pointers[index]

    def close(self) -> None:
        if self.ptr:
            mtmd.mtmd_input_chunks_free(self.ptr)
            self.ptr = None
            self._pointers = []


def _describe(chunk: mtmd.mtmd_input_chunk_p) -> Chunk:
    kind = mtmd.mtmd_input_chunk_get_type(chunk)
    if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
        n = ctypes.c_size_t(0)
        tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
        return TextChunk(tuple(tokens[: n.value]) if n.value else ())
    if kind not in _KINDS:
        raise ProjectorError(f"llama.cpp made a chunk of unknown type {kind}")
    media_id = mtmd.mtmd_input_chunk_get_id(chunk)
    return MediaChunk(_KINDS[kind], int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)),
                      int(mtmd.mtmd_input_chunk_get_n_pos(chunk)), (media_id or b"").decode("ascii", "replace"))


# ---------------------------------------------------------------- the projector


class Projector:
    """A loaded model's projector (an mtmd context); close() frees it, and must come before the model's.

    Reads and checks the file first (models/formats/projector_header.py): NotAProjector (a text model),
    InvalidModelFile (truncated, corrupt, or values llama.cpp would abort on), ProjectorMismatch (its
    embeddings are not as wide as the model's input) are raised before llama.cpp opens it; ProjectorError
    when llama.cpp refuses it. `use_gpu` puts the encoder on the GPU (as the model's layers are),
    `n_threads` are its CPU threads. `warmup` encodes a dummy image at load, so the compute buffer is
    allocated (and logged) then rather than at the first image. `marker`: the text that stands for a media in
    prompts (DEFAULT_MARKER unless given; a marker no person types keeps a user's text from being taken for one).
    """

    def __init__(self, path: Path, llama: LlamaHandle, use_gpu: bool, n_threads: int, warmup: bool = True,
                 marker: str | None = None):
        self.info: ProjectorInfo = read_projector_info(path)
        self._llama = llama
        self.n_embd_inp = int(llama_cpp.llama_model_n_embd_inp(llama.model_pointer))
        check_pairs_with(self.info, self.n_embd_inp)
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = warmup
        marker_bytes = marker.encode("utf-8") if marker else None  # libmtmd copies it at init
        if marker_bytes:
            params.media_marker = marker_bytes
        self.ptr = mtmd.mtmd_init_from_file(str(path).encode("utf-8"), llama.model_pointer, params)
        if not self.ptr:
            raise ProjectorError(f"llama.cpp could not load the projector {path.name} (its log says why)")
        self._closer = weakref.finalize(self, mtmd.mtmd_free, self.ptr)  # a projector dropped unclosed frees too
        self._closer.atexit = False  # at exit the OS frees it; CUDA may be gone by then
        self.path = path
        self.supports_vision = bool(mtmd.mtmd_support_vision(self.ptr))
        self.supports_audio = bool(mtmd.mtmd_support_audio(self.ptr))
        self.audio_sample_rate = int(mtmd.mtmd_get_audio_sample_rate(self.ptr)) if self.supports_audio else None
        # Gemma 3's images attend to each other both ways: their chunk is decoded with causal attention off,
        # all of it in one ubatch.
        self.non_causal = bool(mtmd.mtmd_decode_use_non_causal(self.ptr, None))
        self.uses_mrope = bool(mtmd.mtmd_decode_use_mrope(self.ptr))  # Qwen-VL: an image takes fewer positions
        self.marker = (mtmd.mtmd_get_marker(self.ptr) or DEFAULT_MARKER.encode()).decode("utf-8")

    def close(self) -> None:
        self._closer()
        self.ptr = None

    def _live(self) -> None:
        if not self.ptr:
            raise ProjectorError("the projector was closed")
        if not self._llama.model_pointer:
            raise ProjectorError("the model was closed before its projector")

    # ------------------------------------------------------------ prompts

    def tokenize(self, text: str, bitmaps: Sequence[Bitmap], add_bos: bool, special: bool = True) -> Prompt:
        """`text` with one marker (self.marker) per bitmap, in order, cut into chunks. ProjectorError when the
        counts differ, a media is of a kind the projector does not take, or llama.cpp cannot preprocess one."""
        self._live()
        markers = text.count(self.marker)
        if markers != len(bitmaps):
            raise ProjectorError(f"the prompt has {markers} media marker{'s' * (markers != 1)} for {len(bitmaps)} media")
        for m in bitmaps:
            if not (self.supports_vision if m.kind == "image" else self.supports_audio):
                # libmtmd asserts (aborts the process) on a media its encoders cannot take
                raise ProjectorError(f"the projector {self.path.name} takes no {_plural(m.kind)}")
            if not m.ptr:
                raise ProjectorError(f"a {m.kind} given was already freed")
        raw = text.encode("utf-8")
        text_in = mtmd.mtmd_input_text(raw, len(raw), add_bos, special)
        array = (mtmd.mtmd_bitmap_p_ctypes * max(len(bitmaps), 1))(*(m.ptr for m in bitmaps))
        chunks = mtmd.mtmd_input_chunks_init()
        if not chunks:
            raise ProjectorError("llama.cpp could not allocate a prompt's chunks")
        code = mtmd.mtmd_tokenize(self.ptr, chunks, ctypes.byref(text_in), array, len(bitmaps))
        if code != 0:
            mtmd.mtmd_input_chunks_free(chunks)
            raise ProjectorError(f"llama.cpp could not tokenize the prompt: "
                                 f"{_TOKENIZE_ERRORS.get(code, f'error {code}')}")
        try:
            return Prompt(chunks, self._llama.n_vocab)
        except BaseException:
            mtmd.mtmd_input_chunks_free(chunks)
            raise

    def evaluate(self, prompt: Prompt, n_past: int, seq_id: int = 0, first: int = 0, end: int | None = None) -> int:
        """Evaluate chunks [first, end) of `prompt` into sequence `seq_id` from position `n_past`; the new n_past.

        Text chunks go through the model's batch (the logits of the last token of each batch are kept, so a
        prompt that ends in text can be sampled at once); media chunks are encoded by the projector and their
        embeddings decoded at the next positions (mtmd_helper_eval_chunk_single: the sequence id and the
        positions are ours, causal attention is turned off and on again around an image that asks for it;
        no logits are kept for a media chunk). On a failure the sequence is cut back to where the failed
        chunk began and ProjectorError (NoFreeCells when the cache is full) raised.
        """
        self._live()
        chunks = prompt.chunks[first:end]
        unknown = sum(1 for c in chunks if isinstance(c, TextChunk) for t in c.tokens if not 0 <= t < self._llama.n_vocab)
        if unknown:  # refused before anything is encoded or decoded
            raise ProjectorError(f"the markers {self.path.name} puts around its media are not in the model's "
                                 f"vocabulary ({unknown} unknown tokens): the projector was made for another model")
        n_ubatch = int(llama_cpp.llama_n_ubatch(self._llama.context_pointer))
        for i, chunk in enumerate(chunks, start=first):
            start = n_past
            try:
                if isinstance(chunk, TextChunk):
                    n_past = self._decode_text(chunk, n_past, seq_id)
                else:
                    n_past = self._decode_media(prompt, i, chunk, n_past, seq_id, n_ubatch)
            except ProjectorError:
                self._llama.seq_rm(seq_id, start, -1)
                raise
        return n_past

    def _decode_text(self, chunk: TextChunk, n_past: int, seq_id: int) -> int:
        llama, tokens = self._llama, chunk.tokens
        for i in range(0, len(tokens), llama.n_batch):
            batch = tokens[i : i + llama.n_batch]
            _check_code(llama.decode(batch, n_past, seq_id), f"{len(batch)} text tokens")
            n_past += len(batch)
        return n_past

    def _decode_media(self, prompt: Prompt, index: int, chunk: MediaChunk, n_past: int, seq_id: int,
                      n_ubatch: int) -> int:
        non_causal = bool(mtmd.mtmd_decode_use_non_causal(self.ptr, prompt.pointer(index)))
        if non_causal and chunk.n_tokens > n_ubatch:
            # Attention both ways only holds inside one ubatch: a larger image would be decoded wrongly.
            raise ProjectorError(f"an {chunk.kind} of {chunk.n_tokens} tokens must be decoded in one ubatch, "
                                 f"and the context's holds {n_ubatch}")
        new_n_past = llama_cpp.llama_pos(n_past)  # the helper adds to it for text; sets it for media
        code = mtmd.mtmd_helper_eval_chunk_single(self.ptr, self._llama.context_pointer, prompt.pointer(index),
                                                  n_past, seq_id, self._llama.n_batch, False,
                                                  ctypes.byref(new_n_past))
        _check_code(code, f"an {chunk.kind} of {chunk.n_tokens} tokens")
        if new_n_past.value != n_past + chunk.n_pos:
            raise ProjectorError(f"llama.cpp moved the sequence by {new_n_past.value - n_past} positions for an "
                                 f"{chunk.kind} of {chunk.n_pos}")
        return new_n_past.value


def _plural(kind: MediaKind) -> str:
    return "images" if kind == "image" else "audio"


def _check_code(code: int, what: str) -> None:
    """llama_decode's (or the helper's) code: 0 ok, 1 no free cells, anything else an error."""
    if code == 1:
        raise NoFreeCells(f"no free cells in the KV cache for {what}")
    if code != 0:
        raise ProjectorError(f"llama.cpp could not evaluate {what} (code {code})")


@contextlib.contextmanager
def media(*bitmaps: Bitmap):
    """Frees the bitmaps when the block ends (they are copied into a prompt's chunks by tokenize)."""
    with contextlib.ExitStack() as stack:
        for b in bitmaps:
            stack.enter_context(contextlib.closing(b))
        yield bitmaps

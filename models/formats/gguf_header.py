"""Read a GGUF file's header (metadata, tensor infos) from a path or URL without loading weights."""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.formats.byte_source import DEFAULT_TIMEOUT_S, ByteSource, open_byte_source
from models.formats.errors import InvalidModelFile
from models.formats.ggml_types import FILE_TYPES
from models.formats.gguf_checks import check_hparams
from models.formats.gguf_parse import GgufArray, parse_gguf
from models.formats.header_reader import DEFAULT_MAX_HEADER_BYTES, HeaderReader
from models.formats.tensor_info import TensorInfo

__all__ = ["GgufArray", "GgufHeader", "InvalidModelFile", "TensorInfo", "read_gguf_header"]

# Layer period of the sliding-window layout that llama.cpp hard-codes for architectures whose
# files carry `sliding_window` but no `sliding_window_pattern` key: in each group of N layers
# the last one uses full attention, the others the window.
DEFAULT_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4}


@dataclass(slots=True, frozen=True)
class GgufHeader:
    """Everything a GGUF header says, with the model's shape as properties.

    Attributes:
        source: The path or URL read.
        version: GGUF version (2 or 3).
        alignment: Alignment of tensor data in bytes.
        metadata: Every metadata key and its value: int, float, bool, str, a tuple for an
            array of at most 1024 items, or a `GgufArray` (length and first items) for longer ones.
        tensors: The tensor infos, in file order.
        data_offset: Byte offset of the tensor data section in the file.
        file_size: Size of the file in bytes, when known.
    """

    source: str
    version: int
    alignment: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    file_size: int | None

    def _arch(self, key: str) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}")

    @property
    def architecture(self) -> str | None:
        """`general.architecture`, e.g. `llama`."""
        return self.metadata.get("general.architecture")

    @property
    def name(self) -> str | None:
        """`general.name`."""
        return self.metadata.get("general.name")

    @property
    def n_layers(self) -> int | None:
        """Number of transformer blocks."""
        return self._arch("block_count")

    @property
    def n_embd(self) -> int | None:
        """Hidden size."""
        return self._arch("embedding_length")

    @property
    def n_ff(self) -> int | tuple[int, ...] | None:
        """Feed-forward size, or one per layer."""
        return self._arch("feed_forward_length")

    @property
    def n_heads(self) -> int | tuple[int, ...] | None:
        """Attention heads, or one count per layer."""
        return self._arch("attention.head_count")

    @property
    def n_kv_heads(self) -> int | tuple[int, ...] | None:
        """Key/value heads (GQA), or one count per layer; defaults to `n_heads`."""
        value = self._arch("attention.head_count_kv")
        return self.n_heads if value is None else value

    def _default_head_dim(self) -> int | None:
        heads = self.n_heads
        if isinstance(heads, tuple):
            heads = max(heads, default=0)
        if not self.n_embd or not heads:
            return None
        return self.n_embd // heads

    @property
    def head_dim_k(self) -> int | None:
        """Size of one key head (`attention.key_length`, default n_embd / n_heads)."""
        value = self._arch("attention.key_length")
        return self._default_head_dim() if value is None else value

    @property
    def head_dim_v(self) -> int | None:
        """Size of one value head (`attention.value_length`, default n_embd / n_heads)."""
        value = self._arch("attention.value_length")
        return self._default_head_dim() if value is None else value

    @property
    def n_vocab(self) -> int | None:
        """Vocabulary size: the length of `tokenizer.ggml.tokens`, else `{arch}.vocab_size`."""
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        if isinstance(tokens, tuple | GgufArray):
            return len(tokens)
        return self._arch("vocab_size")

    @property
    def n_ctx_train(self) -> int | None:
        """Context length the model was trained for."""
        return self._arch("context_length")

    @property
    def sliding_window(self) -> int | None:
        """Sliding-window attention size in tokens; None when the model has none."""
        return self._arch("attention.sliding_window") or None

    @property
    def swa_layers(self) -> tuple[bool, ...] | None:
        """Per layer, True when it attends through the sliding window; None when unknown or no SWA.

        From `{arch}.attention.sliding_window_pattern`: a bool (or 0/1) per layer, or a period N
        where the last layer of every N uses full attention (0: all layers use the window);
        without the key, the period llama.cpp hard-codes for gemma2/gemma3/cohere2.
        """
        n_layers = self.n_layers
        if self.sliding_window is None or not isinstance(n_layers, int):
            return None
        pattern = self._arch("attention.sliding_window_pattern")
        if isinstance(pattern, tuple):
            return tuple(bool(v) for v in pattern)
        if isinstance(pattern, int) and not isinstance(pattern, bool):
            period = pattern
        elif self.architecture in DEFAULT_SWA_PERIOD:
            period = DEFAULT_SWA_PERIOD[self.architecture]
        else:
            return None
        return tuple(period == 0 or i % period < period - 1 for i in range(n_layers))

    @property
    def n_expert(self) -> int | None:
        """Experts of a mixture-of-experts model (`{arch}.expert_count`); None (or 0) when dense."""
        return self._arch("expert_count")

    @property
    def n_expert_used(self) -> int | tuple[int, ...] | None:
        """Experts each token is routed to (`{arch}.expert_used_count`), or one count per layer."""
        return self._arch("expert_used_count")

    @property
    def n_ff_expert(self) -> int | tuple[int, ...] | None:
        """Feed-forward size of one expert (`{arch}.expert_feed_forward_length`), or one per layer."""
        return self._arch("expert_feed_forward_length")

    @property
    def file_type(self) -> int | None:
        """`general.file_type`: llama.cpp's llama_ftype id."""
        return self.metadata.get("general.file_type")

    @property
    def quant_name(self) -> str:
        """Quantization name (`Q4_K_M`): from `general.file_type`, else the type holding most 2-D weight bytes."""
        if self.file_type in FILE_TYPES:
            return FILE_TYPES[self.file_type]
        counts: Counter[str] = Counter()
        for t in self.tensors:
            if len(t.shape) >= 2:
                counts[t.type_name] += t.nbytes
        return counts.most_common(1)[0][0] if counts else "unknown"

    @property
    def weights_bytes(self) -> int:
        """Total bytes of tensor data (without alignment padding)."""
        return sum(t.nbytes for t in self.tensors)

    def tensor(self, name: str) -> TensorInfo:
        """The tensor called `name`.

        Raises:
            KeyError: No such tensor.
        """
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def layer_tensors(self, i: int) -> tuple[TensorInfo, ...]:
        """The tensors of block `i` (named `blk.{i}.*`)."""
        prefix = f"blk.{i}."
        return tuple(t for t in self.tensors if t.name.startswith(prefix))


def read_gguf_header(
    source: str | Path | ByteSource,
    headers: dict[str, str] | None = None,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> GgufHeader:
    """Read and validate the header of a GGUF file, fetching only the header's bytes.

    Args:
        source: A local path, an http(s) URL (read with Range requests) or a ByteSource
            (left open for the caller to close).
        headers: Extra HTTP headers, e.g. `{"Authorization": "Bearer ..."}`.
        max_header_bytes: Refuse headers larger than this (protects memory on hostile files).
        timeout: Seconds for each network operation.

    Returns:
        The parsed header.

    Raises:
        InvalidModelFile: The file is missing, unreachable, not GGUF, truncated or malformed, or
            its sliding window or expert counts are absurd (models/formats/gguf_checks.py); the message
            names the file and the problem.
    """
    byte_source = open_byte_source(source, headers=headers, timeout=timeout)
    try:
        parsed = parse_gguf(HeaderReader(byte_source, max_header_bytes))
    except (struct.error, UnicodeDecodeError, OverflowError, IndexError, MemoryError) as exc:
        raise InvalidModelFile(byte_source.name, f"malformed GGUF header ({type(exc).__name__}: {exc})") from None
    finally:
        if byte_source is not source:
            byte_source.close()
    header = GgufHeader(
        source=byte_source.name,
        version=parsed.version,
        alignment=parsed.alignment,
        metadata=parsed.metadata,
        tensors=parsed.tensors,
        data_offset=parsed.data_offset,
        file_size=byte_source.size,
    )
    check_hparams(header)  # a well-formed file can still hold a window or expert count no model has
    return header


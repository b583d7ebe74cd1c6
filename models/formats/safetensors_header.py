"""Read a safetensors file's header (and a sharded checkpoint's index) without loading weights."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from models.formats.byte_source import DEFAULT_TIMEOUT_S, ByteSource, open_byte_source
from models.formats.errors import InvalidModelFile
from models.formats.header_reader import HeaderReader
from models.formats.hf_config import HfConfig, parse_json_object, read_hf_config, read_json_document
from models.formats.tensor_info import TensorInfo

__all__ = [
    "HfConfig", "InvalidModelFile", "SafetensorsHeader", "SafetensorsIndex", "TensorInfo",
    "read_hf_config", "read_safetensors_header", "read_safetensors_index",
]  # fmt: skip

MAX_HEADER_BYTES = 100_000_000  # the limit of the safetensors library itself
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
    "U16": 16, "I16": 16, "F16": 16, "BF16": 16, "U32": 32, "I32": 32, "F32": 32,
    "U64": 64, "I64": 64, "F64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}  # fmt: skip
# Suffixes of AWQ/GPTQ tensors: qweight packs 32/bits weights per int32; the others are not weights.
PACKED_WEIGHT_SUFFIX = ".qweight"
QUANT_AUX_SUFFIXES = (".qzeros", ".scales", ".g_idx")


@dataclass(slots=True, frozen=True)
class SafetensorsHeader:
    """What a safetensors header says.

    Attributes:
        source: The path or URL read.
        header_size: N, the length of the JSON header.
        metadata: The `__metadata__` strings.
        tensors: Tensor infos in the header's order; offsets are relative to `data_offset`.
        data_offset: 8 + N.
        file_size: Size of the file in bytes, when known.
    """

    source: str
    header_size: int
    metadata: dict[str, str]
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    file_size: int | None

    @property
    def weights_bytes(self) -> int:
        """Bytes of all tensors as stored; for AWQ/GPTQ that is the packed int32 weights plus scales and zeros."""
        return sum(t.nbytes for t in self.tensors)

    @property
    def is_packed_quant(self) -> bool:
        """True when the file holds AWQ/GPTQ-style packed weights (`*.qweight`)."""
        return any(t.name.endswith(PACKED_WEIGHT_SUFFIX) for t in self.tensors)

    def n_params(self, bits: int = 4) -> int:
        """Number of model parameters, counting `bits`-bit weights packed in each int32 of a qweight."""
        total = 0
        for t in self.tensors:
            if t.name.endswith(PACKED_WEIGHT_SUFFIX):
                total += t.n_elements * (32 // bits)
            elif not t.name.endswith(QUANT_AUX_SUFFIXES):
                total += t.n_elements
        return total

    def tensor(self, name: str) -> TensorInfo:
        """The tensor called `name` (KeyError if absent)."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)


def read_safetensors_header(
    source: str | Path | ByteSource, headers: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> SafetensorsHeader:
    """Read and validate the header of a safetensors file, fetching only the header's bytes.

    Args:
        source: A local path, an http(s) URL or a ByteSource (left open for the caller).
        headers: Extra HTTP headers (a hub token).
        timeout: Seconds for each network operation.

    Raises:
        InvalidModelFile: The first problem found, naming the file.
    """
    byte_source = open_byte_source(source, headers=headers, timeout=timeout)
    try:
        reader = HeaderReader(byte_source, 8 + MAX_HEADER_BYTES)
        n = reader.u64("the header length")
        if n > MAX_HEADER_BYTES:
            raise reader.fail(f"header length {n} is absurd (more than {MAX_HEADER_BYTES} bytes)")
        raw = reader.take(n, f"the JSON header ({n} bytes)")
    finally:
        if byte_source is not source:
            byte_source.close()
    doc = parse_json_object(byte_source.name, raw, "the header")
    return _interpret(byte_source.name, doc, n, byte_source.size)


def _interpret(name: str, doc: dict[str, Any], n: int, size: int | None) -> SafetensorsHeader:
    def fail(problem: str) -> InvalidModelFile:
        return InvalidModelFile(name, problem)

    metadata = doc.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise fail("__metadata__ must map names to strings")
    tensors: list[TensorInfo] = []
    for tname, entry in doc.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise fail(f"tensor {tname!r} must have exactly dtype, shape and data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPE_BITS:
            raise fail(f"tensor {tname!r} has unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise fail(f"tensor {tname!r} has an invalid shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int and o >= 0 for o in offsets)):
            raise fail(f"tensor {tname!r} has invalid data_offsets {offsets!r}")
        begin, end = offsets
        if begin > end:
            raise fail(f"tensor {tname!r} has data_offsets out of order: {begin} > {end}")
        n_elements = 1
        for dim in shape:
            n_elements *= dim
        nbits = n_elements * DTYPE_BITS[dtype]
        if nbits % 8 or nbits // 8 != end - begin:
            raise fail(
                f"tensor {tname!r}: shape {shape} of {dtype} needs {nbits / 8:g} bytes "
                f"but data_offsets give {end - begin}"
            )
        tensors.append(TensorInfo(tname, -1, dtype, tuple(shape), begin, end - begin))
    cursor, previous = 0, None
    for t in sorted(tensors, key=lambda t: (t.offset, t.nbytes)):
        if t.offset < cursor:
            raise fail(f"tensors {previous!r} and {t.name!r} overlap")
        if t.offset > cursor:
            raise fail(f"a gap of {t.offset - cursor} bytes lies before tensor {t.name!r}")
        cursor, previous = t.offset + t.nbytes, t.name
    if size is not None and 8 + n + cursor != size:
        if 8 + n + cursor > size:
            raise fail(f"tensor data ends at byte {8 + n + cursor}, past the end of the file ({size} bytes): truncated")
        raise fail(f"the file has {size - 8 - n - cursor} bytes after its last tensor")
    return SafetensorsHeader(name, n, dict(metadata), tuple(tensors), 8 + n, size)


@dataclass(slots=True, frozen=True)
class SafetensorsIndex:
    """`model.safetensors.index.json` of a sharded checkpoint.

    Attributes:
        source: The path or URL read.
        total_size: `metadata.total_size` (bytes of all tensors), when given.
        weight_map: Tensor name -> shard file name (relative to the index's folder).
        shards: The shard file names, sorted, each once.
    """

    source: str
    total_size: int | None
    weight_map: dict[str, str]
    shards: tuple[str, ...]


def read_safetensors_index(
    source: str | Path | ByteSource, headers: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> SafetensorsIndex:
    """Read a sharded checkpoint's index; shard names that escape the folder are refused.

    Raises:
        InvalidModelFile: Missing, not JSON, no weight_map, or a bad shard name.
    """
    name, doc = read_json_document(source, headers, "the index", timeout=timeout)
    weight_map = doc.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InvalidModelFile(name, "the index has no weight_map of tensor names to file names")
    for shard in set(weight_map.values()):
        path = PurePosixPath(shard)
        if not shard or path.is_absolute() or ".." in path.parts or "\\" in shard:
            raise InvalidModelFile(name, f"the index names a shard outside its folder: {shard!r}")
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    total = int(total) if isinstance(total, int | float) and not isinstance(total, bool) else None
    return SafetensorsIndex(name, total, dict(weight_map), tuple(sorted(set(weight_map.values()))))

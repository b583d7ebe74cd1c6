"""Parse the header of a GGUF file (v2/v3, little-endian): metadata and tensor infos, never the weights."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from models.formats.ggml_types import GGML_TYPES
from models.formats.header_reader import HeaderReader
from models.formats.tensor_info import TensorInfo

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
MAX_ARRAY_DEPTH = 3  # an array of arrays of arrays is the deepest accepted
MAX_NAME_BYTES = 63  # ggml's GGML_MAX_NAME (64) includes the terminating NUL
KEEP_ARRAY_ITEMS = 1024  # longer arrays keep only their length and first items
ARRAY_HEAD_ITEMS = 8
INT64_MAX = (1 << 63) - 1

STRING, ARRAY = 8, 9
# value type -> (name, struct format); strings and arrays are handled apart
SCALARS: dict[int, tuple[str, struct.Struct]] = {
    0: ("UINT8", struct.Struct("<B")), 1: ("INT8", struct.Struct("<b")),
    2: ("UINT16", struct.Struct("<H")), 3: ("INT16", struct.Struct("<h")),
    4: ("UINT32", struct.Struct("<I")), 5: ("INT32", struct.Struct("<i")),
    6: ("FLOAT32", struct.Struct("<f")), 7: ("BOOL", struct.Struct("<B")),
    10: ("UINT64", struct.Struct("<Q")), 11: ("INT64", struct.Struct("<q")),
    12: ("FLOAT64", struct.Struct("<d")),
}  # fmt: skip
BOOL = 7
TYPE_NAMES = {**{t: name for t, (name, _) in SCALARS.items()}, STRING: "STRING", ARRAY: "ARRAY"}
# smallest encoding of one value of each type: what a count must be checked against
MIN_VALUE_BYTES = {**{t: fmt.size for t, (_, fmt) in SCALARS.items()}, STRING: 8, ARRAY: 4 + 8}
MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, one byte of value
MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8  # empty name, n_dims, one dim, type, offset


@dataclass(slots=True, frozen=True)
class GgufArray:
    """A long metadata array, kept as its length and first items so memory stays bounded.

    Attributes:
        item_type: The GGUF type name of the items (`STRING`, `INT32`, `ARRAY`...).
        length: Number of items.
        head: The first few items.
    """

    item_type: str
    length: int
    head: tuple[Any, ...]

    def __len__(self) -> int:
        return self.length


@dataclass(slots=True)
class ParsedGguf:
    """The raw result of `parse_gguf`, turned into a GgufHeader by its caller."""

    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int


def parse_gguf(r: HeaderReader) -> ParsedGguf:
    """Read and validate a whole GGUF header from `r`.

    Raises:
        InvalidModelFile: The first problem found.
    """
    magic = r.take(4, "the magic number") if r.remaining() >= 4 else b""
    if magic != GGUF_MAGIC:
        start = magic or r.source.read(0, 4)
        if len(start) < 4:
            raise r.fail(f"too short to be a GGUF file ({len(start)} bytes)")
        raise r.fail(f"not a GGUF file: it starts with {start!r}, not {GGUF_MAGIC!r}")
    version = r.u32("the version")
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped in (1, 2, 3):
            raise r.fail(f"big-endian GGUF (version {swapped}) is not supported; use a little-endian file")
        raise r.fail(f"GGUF version {version} is not supported (only versions 2 and 3)")
    n_tensors = r.u64("the tensor count")
    n_kv = r.u64("the metadata count")
    r.check_count(n_kv, MIN_KV_BYTES, "metadata key-value")
    r.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, "tensor")

    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = r.string(f"metadata key #{i}")
        if key in metadata:
            raise r.fail(f"duplicate metadata key {key!r}")
        vtype = r.u32(f"the type of {key!r}")
        if vtype not in TYPE_NAMES:
            raise r.fail(f"metadata key {key!r} has unknown value type {vtype}")
        metadata[key] = _read_value(r, vtype, key, depth=0)

    alignment = _alignment(r, metadata)
    r.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, "tensor")
    infos = [_read_tensor_info(r, i) for i in range(n_tensors)]
    data_offset = -(-r.pos // alignment) * alignment
    tensors = _check_tensors(r, infos, alignment, data_offset)
    return ParsedGguf(version, metadata, tensors, alignment, data_offset)


def _read_value(r: HeaderReader, vtype: int, key: str, depth: int) -> Any:
    if vtype in SCALARS:
        value = r.unpack(SCALARS[vtype][1], f"the value of {key!r}")[0]
        return bool(value) if vtype == BOOL else value
    if vtype == STRING:
        return r.string(f"the value of {key!r}")
    if depth >= MAX_ARRAY_DEPTH:
        raise r.fail(f"metadata key {key!r} nests arrays more than {MAX_ARRAY_DEPTH} deep")
    item_type = r.u32(f"the item type of array {key!r}")
    if item_type not in TYPE_NAMES:
        raise r.fail(f"array {key!r} has unknown item type {item_type}")
    count = r.u64(f"the length of array {key!r}")
    r.check_count(count, MIN_VALUE_BYTES[item_type], f"array {key!r} item")
    keep = count if count <= KEEP_ARRAY_ITEMS else ARRAY_HEAD_ITEMS
    what = f"array {key!r}"
    if item_type in SCALARS:
        name, fmt = SCALARS[item_type]
        raw = r.take(keep * fmt.size, what)
        items: tuple[Any, ...] = tuple(struct.unpack(f"<{keep}{fmt.format[-1]}", raw))
        if item_type == BOOL:
            items = tuple(bool(v) for v in items)
        r.skip((count - keep) * fmt.size, what)
    elif item_type == STRING:
        items = tuple(r.string(f"item {j} of {what}", strict=False) for j in range(keep))
        r.skip_strings(count - keep, what)
    else:
        kept: list[Any] = []
        for j in range(count):
            item = _read_value(r, ARRAY, f"{key}[{j}]", depth + 1)
            if j < keep:
                kept.append(item)
        items = tuple(kept)
    if count <= KEEP_ARRAY_ITEMS:
        return items
    return GgufArray(TYPE_NAMES[item_type], count, items)


def _alignment(r: HeaderReader, metadata: dict[str, Any]) -> int:
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int):
        raise r.fail(f"general.alignment must be an integer, not {alignment!r}")
    if alignment <= 0 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment {alignment} is not a power of two")
    return alignment


def _read_tensor_info(r: HeaderReader, i: int) -> tuple[str, int, tuple[int, ...], int]:
    name = r.string(f"the name of tensor #{i}")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise r.fail(f"tensor #{i} has a name longer than {MAX_NAME_BYTES} bytes: {name[:80]!r}")
    n_dims = r.u32(f"the number of dimensions of tensor {name!r}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise r.fail(f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
    shape = r.unpack(struct.Struct(f"<{n_dims}Q"), f"the dimensions of tensor {name!r}")
    ggml_type = r.u32(f"the type of tensor {name!r}")
    offset = r.u64(f"the offset of tensor {name!r}")
    return name, ggml_type, shape, offset


def _check_tensors(
    r: HeaderReader, infos: list[tuple[str, int, tuple[int, ...], int]], alignment: int, data_offset: int
) -> tuple[TensorInfo, ...]:
    size = r.source.size
    seen: set[str] = set()
    tensors: list[TensorInfo] = []
    for name, ggml_type, shape, offset in infos:
        if name in seen:
            raise r.fail(f"duplicate tensor name {name!r}")
        seen.add(name)
        if 0 in shape:
            raise r.fail(f"tensor {name!r} has a dimension of 0: {shape}")
        n = 1
        for dim in shape:
            n *= dim
        if n > INT64_MAX:
            raise r.fail(f"tensor {name!r} has dimensions {shape} whose product overflows int64")
        if ggml_type not in GGML_TYPES:
            raise r.fail(f"tensor {name!r} has unknown ggml type {ggml_type}")
        type_name, block, type_size = GGML_TYPES[ggml_type]
        if shape[0] % block:
            raise r.fail(f"tensor {name!r}: first dimension {shape[0]} is not a multiple of {type_name}'s block of {block}")
        nbytes = n // block * type_size
        if offset % alignment:
            raise r.fail(f"tensor {name!r} has offset {offset}, not aligned to {alignment} bytes")
        end = data_offset + offset + nbytes
        if end > INT64_MAX or (size is not None and end > size):
            raise r.fail(
                f"tensor {name!r} data ends at byte {end}, past the end of the file ({size} bytes): "
                "the file is truncated or corrupt"
            )
        tensors.append(TensorInfo(name, ggml_type, type_name, shape, offset, nbytes))
    by_offset = sorted(tensors, key=lambda t: t.offset)
    for before, after in zip(by_offset, by_offset[1:], strict=False):
        if after.offset < before.offset + before.nbytes:
            raise r.fail(f"tensors {before.name!r} and {after.name!r} overlap")
    return tuple(tensors)

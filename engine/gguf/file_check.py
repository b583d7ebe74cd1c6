"""Cheap checks of a model path before llama.cpp sees it, for clear errors."""

from __future__ import annotations

import struct
from pathlib import Path

from models.formats.errors import InvalidModelFile as _ReadError
from models.formats.local_file import open_regular_file

GGUF_MAGIC = b"GGUF"
# magic, version, tensor count, metadata count
_HEADER = struct.Struct("<4sIQQ")


class InvalidModelFile(ValueError):
    """The path is missing, not a GGUF file, or cannot be one."""


def check_gguf_path(path: Path) -> None:
    """Raise InvalidModelFile with the file name unless `path` looks like a GGUF file.

    The full header is validated by llama.cpp when it loads; this catches the common
    mistakes (wrong path, a directory, a FIFO or device, another format, an empty or
    cut-off file) early. Nothing here blocks: a FIFO is refused before any read.
    """
    name = path.name or str(path)
    try:
        with open_regular_file(path) as f:
            head = f.read(_HEADER.size)
    except _ReadError as exc:
        where = name if exc.source == str(path) else exc.source  # e.g. the folder's config.json
        detail = f" ({path})" if exc.problem == "no such file" else ""
        raise InvalidModelFile(f"{where}: {exc.problem}{detail}") from None
    except OSError as exc:
        raise InvalidModelFile(f"{name}: cannot be read ({exc.strerror})") from exc
    if len(head) < 4 or head[:4] != GGUF_MAGIC:
        raise InvalidModelFile(f"{name}: not a GGUF model file")
    if len(head) < _HEADER.size:
        raise InvalidModelFile(f"{name}: truncated GGUF file (header cut off)")
    _, version, _, _ = _HEADER.unpack(head)
    if version not in (2, 3):
        raise InvalidModelFile(f"{name}: unsupported GGUF version {version}")

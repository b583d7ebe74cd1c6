"""What a model file says about itself, read once per version of the file: its GGUF header's metadata, its
parameter count, its quantization, its chat template and what that template speaks; and its digest.

The digest is the file's sha256 where that is known without reading the file: a file in the Hugging Face
cache (where Tailor's downloads go) is a link to a blob named by the sha256 of its bytes, which the
download checked. Anywhere else it is a stable id, not the content's hash: the sha256 of the file's real
path, size and modification time (it changes when the file does). Hashing gigabytes on each /api/tags
would take minutes.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.reply.shape import TemplateFormats
from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import read_gguf_header
from models.formats.tensor_info import TensorInfo

log = logging.getLogger(__name__)

_SHA256 = re.compile(r"[0-9a-f]{64}")
_REMEMBERED = 256  # files whose facts are kept


@dataclass(slots=True, frozen=True)
class FileFacts:
    """A model file's facts (empty where its header could not be read).

    Attributes:
        digest: 64 hex digits: the file's sha256, or a stable id (see `content_hash`).
        content_hash: The digest is the sha256 of the file's bytes.
        modified: The file's modification time (seconds since the epoch).
        size: The file's size (0 for a folder: the router's figure then stands).
        metadata: The GGUF header's metadata (long arrays as GgufArray).
        tensors: The GGUF header's tensor infos.
        parameter_count: Weights in the file (general.parameter_count, else counted from the tensors).
        quant: The quantization the header says (`Q4_K_M`).
        template: The chat template (Jinja) in the header.
        tools: The template takes tools.
        thinking: The template writes a reasoning block Tailor reads.
    """

    digest: str
    content_hash: bool
    modified: float
    size: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: tuple[TensorInfo, ...] = ()
    parameter_count: int = 0
    quant: str | None = None
    template: str | None = None
    tools: bool = False
    thinking: bool = False


class FactsCache:
    """Facts of the files asked about, read once per (path, size, mtime); safe to use from threads."""

    def __init__(self) -> None:
        self._facts: OrderedDict[tuple[str, int, int], FileFacts] = OrderedDict()
        self._lock = threading.Lock()

    def facts(self, path: str) -> FileFacts:
        """The facts of `path` (a GGUF file or a model folder); blocking: call it off the event loop."""
        try:
            stat = os.stat(path)
        except OSError:
            return FileFacts(_stable_id(path, 0, 0), False, 0.0)
        key = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if key in self._facts:
                self._facts.move_to_end(key)
                return self._facts[key]
        facts = _read(Path(path), stat)
        with self._lock:
            self._facts[key] = facts
            while len(self._facts) > _REMEMBERED:
                self._facts.popitem(last=False)
        return facts


def _read(path: Path, stat: os.stat_result) -> FileFacts:
    digest, content_hash = file_digest(path, stat)
    size = 0 if path.is_dir() else stat.st_size
    if path.is_dir() or path.suffix.lower() != ".gguf":
        return FileFacts(digest, content_hash, stat.st_mtime, size)
    try:
        header = read_gguf_header(path)
    except InvalidModelFile as exc:
        log.warning("cannot read the header of %s: %s", path, exc)
        return FileFacts(digest, content_hash, stat.st_mtime, size)
    metadata = header.metadata
    count = metadata.get("general.parameter_count")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        count = sum(math.prod(t.shape) for t in header.tensors)
    template = metadata.get("tokenizer.chat_template")
    template = template if isinstance(template, str) and template else None
    formats = TemplateFormats.of(template)  # what the engine finds when it loads the file
    return FileFacts(digest, content_hash, stat.st_mtime, size, metadata, header.tensors, count, header.quant_name,
                     template, formats.tools is not None, formats.reasoning is not None)


def file_digest(path: Path, stat: os.stat_result) -> tuple[str, bool]:
    """The file's sha256 where its name in the Hugging Face cache says it (True), else a stable id (False)."""
    real = path.resolve()
    if real.parent.name == "blobs" and _SHA256.fullmatch(real.name):
        return real.name, True
    return _stable_id(str(real), stat.st_size, stat.st_mtime_ns), False


def _stable_id(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(f"tailor-model\0{path}\0{size}\0{mtime_ns}".encode()).hexdigest()


def human_number(n: int) -> str:
    """A parameter count as Ollama writes it: 8B, 7.6B, 494.03M, 135M, 12K."""
    for scale, unit, decimals in ((1e9, "B", 1), (1e6, "M", 2), (1e3, "K", 0)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f}{unit}" if value == math.floor(value) or unit == "K" else f"{value:.{decimals}f}{unit}"
    return str(n)

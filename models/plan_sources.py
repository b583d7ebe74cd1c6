"""Candidates for the decision tree from what there is to read: a GGUF file (local or URL)."""

from __future__ import annotations

from pathlib import Path

from models.forecast import shape_from_gguf
from models.gguf_header import read_gguf_header
from models.plan import Candidate
from models.quant_levels import quant_from_name


def gguf_file_candidate(source: str | Path, headers: dict[str, str] | None = None) -> Candidate:
    """The one candidate a single GGUF file offers, from its header alone.

    Raises:
        InvalidModelFile: the header is unreadable or hostile.
        ValueError: the header lacks a dimension the forecast needs.
    """
    header = read_gguf_header(source, headers=headers)
    name = str(source).rsplit("/", 1)[-1]
    size = header.file_size or header.data_offset + header.weights_bytes
    quant = quant_from_name(name) or header.quant_name
    return Candidate("gguf", (str(source),), quant, size, shape_from_gguf(header))

"""A draft model on disk for speculative decoding: the smallest GGUF with the model's vocabulary.

Speculative: Auto drafts with a model of the same family and tokenizer when one is in the library
(a Qwen2.5-0.5B beside a Qwen2.5-7B). The headers tell the tokenizer (its kind, pre-tokenizer,
size, special tokens and its first tokens); the engine compares every token at load and leaves
out a draft that differs after all. An embedding model is never one, whatever its tokenizer. Headers are
read once per file (size and time unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from models.formats.embedding_models import is_embedding_model
from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import GgufHeader, read_gguf_header
from models.formats.gguf_parse import GgufArray
from models.library import ModelStore
from models.plan.load_options import MAX_VOCAB_SIZE_DIFFERENCE

MAX_SHARE = 0.25  # a draft has at most this share of the model's weights, or it would not pay


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """What the header says of a GGUF's tokenizer: `matches` for files that tokenize alike."""

    model: str
    pre: str
    size: int
    bos: int
    eos: int
    head: tuple[str, ...]

    def matches(self, other: Tokenizer) -> bool:
        """The same tokenizer, its vocabulary padded to another length at most (as the engine accepts)."""
        return (self.model, self.pre, self.bos, self.eos, self.head) == (
            other.model, other.pre, other.bos, other.eos, other.head) and abs(self.size - other.size) <= \
            MAX_VOCAB_SIZE_DIFFERENCE


def tokenizer_of(header: GgufHeader) -> Tokenizer | None:
    meta = header.metadata
    tokens = meta.get("tokenizer.ggml.tokens")
    if tokens is None:
        return None
    head = tuple(tokens.head) if isinstance(tokens, GgufArray) else tuple(tokens)[:16]
    size = tokens.length if isinstance(tokens, GgufArray) else len(tokens)
    return Tokenizer(str(meta.get("tokenizer.ggml.model", "")), str(meta.get("tokenizer.ggml.pre", "")), size,
                     int(meta.get("tokenizer.ggml.bos_token_id", -1)), int(meta.get("tokenizer.ggml.eos_token_id", -1)),
                     head)


def library_ggufs(store: ModelStore) -> list[Path]:
    """Every GGUF file of the library: downloaded ones and imported ones that still exist."""
    library = store.list()
    files = [f.path for repo in library.repos for f in repo.gguf_files]
    return files + [m.path for m in library.imported if m.exists]


class DraftFinder:
    """Finds drafts among `files()` (the library's GGUF files), remembering each file's header.

    Args:
        files: the GGUF files to choose from, asked anew at every search.
    """

    def __init__(self, files: Callable[[], Iterable[Path]]):
        self._files = files
        self._known: dict[Path, tuple[tuple[int, int], Tokenizer | None, int]] = {}

    def find(self, model_path: str) -> Path | None:
        """The smallest file with `model_path`'s tokenizer and at most MAX_SHARE of its weights; None if none."""
        model = self._read(Path(model_path))
        if model is None or model[0] is None:
            return None
        tokenizer, weights = model
        best: tuple[int, Path] | None = None
        for path in self._files():
            seen = self._read(path)
            if seen is None or seen[0] is None or not seen[0].matches(tokenizer) \
                    or path.resolve() == Path(model_path).resolve():
                continue
            if seen[1] <= weights * MAX_SHARE and (best is None or seen[1] < best[0]):
                best = (seen[1], path)
        return best[1] if best else None

    def _read(self, path: Path) -> tuple[Tokenizer | None, int] | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        stamp = (stat.st_size, stat.st_mtime_ns)
        known = self._known.get(path)
        if known is None or known[0] != stamp:
            try:
                header = read_gguf_header(path)
            except InvalidModelFile:
                return None
            # An embedding model writes no text (a Qwen3-Embedding shares Qwen3's tokenizer): never a draft.
            tokenizer = None if is_embedding_model(header.metadata) else tokenizer_of(header)
            known = (stamp, tokenizer, header.weights_bytes)
            self._known[path] = known
        return known[1], known[2]


def library_drafts(data_dir: Path) -> DraftFinder:
    """A DraftFinder over the user's library (the hub cache and the imported files)."""
    return DraftFinder(lambda: library_ggufs(ModelStore(data_dir)))

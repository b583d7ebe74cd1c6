"""DocumentIndex: the SQLite index of documents and their chunks, searched with FTS5's BM25.

One connection per DocumentIndex, used from the thread that made it (a folder indexed in the background
opens its own). Writes go in explicit transactions: a document's row and all its chunks commit together,
so a crash or a cancel mid-file leaves the file unindexed, never half indexed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from app.services.documents.chunking import Chunk
from app.services.documents.document import Document
from app.services.documents.index import vectors
from app.services.documents.index.fts_query import match_expression
from app.services.documents.index.fusion import reciprocal_rank_fusion
from app.services.documents.index.schema import open_index_db

# Chunks are inserted this many at a time: one executemany each, so a long document's chunks stream from
# the chunker into the database without all being held.
INSERT_BATCH = 256

# How many keyword hits are fused with a vector ranking: enough that a passage the vectors rank high
# but the words rank low can still surface.
FUSION_DEPTH = 50

# BM25 weights of the FTS columns: the passage's own text, then its context (heading path, header row),
# which is shared by many chunks and so says less about any one of them.
_BM25 = "bm25(chunks_fts, 1.0, 0.5)"


@dataclass(frozen=True, slots=True)
class SourceState:
    """What the index knows of a path: the content it held and the stat it had then."""

    sha256: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Hit:
    """One chunk a search found.

    Attributes:
        chunk_id: its row id (the key a vector ranking uses too).
        score: higher is better: BM25's (negated, as SQLite's is lower-better), or the fused score when a
            vector ranking took part.
        source: the path of a file that holds it (the first by name, when copies hold the same content).
        name: the document's name; kind its kind.
        page: its page (PDF), else None.
        headings: its heading path, outermost first.
        start, end: its span in the document's extracted text.
        text: the passage.
    """

    chunk_id: int
    score: float
    source: str
    name: str
    kind: str
    page: int | None
    headings: tuple[str, ...]
    start: int
    end: int
    text: str


class DocumentIndex:
    """The document index kept in the SQLite file at `path` (created if missing)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._db = open_index_db(str(self.path))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> DocumentIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything inside commits together, or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # ---- what is indexed

    def source_state(self, source: str) -> SourceState | None:
        row = self._db.execute("SELECT sha256, size, mtime_ns FROM sources WHERE path = ?", (source,)).fetchone()
        return SourceState(*row) if row else None

    def has_content(self, sha256: str) -> bool:
        return self._db.execute("SELECT 1 FROM documents WHERE sha256 = ?", (sha256,)).fetchone() is not None

    def sources(self, under: str | None = None) -> list[str]:
        """The indexed paths, sorted; only those inside the folder `under` when given."""
        rows = self._db.execute("SELECT path FROM sources ORDER BY path").fetchall()
        paths = [path for (path,) in rows]
        if under is None:
            return paths
        prefix = under.rstrip(os.sep) + os.sep
        return [path for path in paths if path.startswith(prefix)]

    def counts(self) -> tuple[int, int]:
        """(documents, chunks) in the index."""
        documents = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
        chunks = self._db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return documents, chunks

    def warnings(self, source: str) -> list[str]:
        row = self._db.execute("SELECT d.warnings FROM sources s JOIN documents d USING (sha256) "
                               "WHERE s.path = ?", (source,)).fetchone()
        return json.loads(row[0]) if row else []

    # ---- writing (inside transaction())

    def put_document(self, sha256: str, document: Document, chunks: Iterable[Chunk]) -> int:
        """Store a document's content and its chunks (inserted INSERT_BATCH at a time); how many chunks.

        Content already stored under `sha256` is replaced.
        """
        self._db.execute("DELETE FROM documents WHERE sha256 = ?", (sha256,))
        self._db.execute(
            "INSERT INTO documents (sha256, name, kind, pages, chars, warnings, indexed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sha256, document.name, document.kind, document.pages, len(document.text),
             json.dumps(list(document.warnings)), time.time()))
        total = 0
        rows = (_chunk_row(sha256, chunk) for chunk in chunks)
        while batch := list(islice(rows, INSERT_BATCH)):
            self._db.executemany(
                'INSERT INTO chunks (sha256, ordinal, page, headings, context, start, "end", text, tokens) '
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", batch)
            total += len(batch)
        return total

    def link_source(self, source: str, sha256: str, size: int, mtime_ns: int) -> None:
        """Point `source` at stored content; the content it held before goes if no other path holds it."""
        previous = self.source_state(source)
        self._db.execute("INSERT INTO sources (path, sha256, size, mtime_ns) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, "
                         "mtime_ns = excluded.mtime_ns", (source, sha256, size, mtime_ns))
        if previous is not None and previous.sha256 != sha256:
            self._drop_orphan(previous.sha256)

    def remove(self, source: str) -> bool:
        """Forget `source`; its content and chunks go too unless another path holds them. Whether it was
        indexed. Runs in its own transaction unless one is open."""
        with self._maybe_transaction():
            previous = self.source_state(source)
            if previous is None:
                return False
            self._db.execute("DELETE FROM sources WHERE path = ?", (source,))
            self._drop_orphan(previous.sha256)
            return True

    def _drop_orphan(self, sha256: str) -> None:
        self._db.execute("DELETE FROM documents WHERE sha256 = ? AND NOT EXISTS "
                         "(SELECT 1 FROM sources WHERE sources.sha256 = documents.sha256)", (sha256,))

    @contextmanager
    def _maybe_transaction(self) -> Iterator[None]:
        if self._db.in_transaction:
            yield
        else:
            with self.transaction():
                yield

    # ---- searching

    # ------------------------------------------------------------ vectors (vectors.py)

    def vector_model(self) -> tuple[str, int] | None:
        """(model, dimension) of the index's chunk embeddings, or None when it has none."""
        return vectors.vector_model(self._db)

    def use_vector_model(self, model: str, dim: int) -> bool:
        """Make `model` the index's embedding model; True when another model's vectors were dropped."""
        with self.transaction():
            return vectors.use_vector_model(self._db, model, dim)

    def chunks_without_vectors(self, limit: int) -> list[tuple[int, str]]:
        return vectors.chunks_without_vectors(self._db, limit)

    def put_vectors(self, chunk_ids: Sequence[int], matrix) -> None:
        with self.transaction():
            vectors.put_vectors(self._db, chunk_ids, matrix)

    def vector_counts(self) -> tuple[int, int]:
        """(chunks with a vector, chunks)."""
        return vectors.vector_counts(self._db)

    def vector_ranking(self, query, k: int = FUSION_DEPTH) -> list[int]:
        """Chunk ids nearest the query vector, nearest first (for `search`'s vector_ranking)."""
        return vectors.vector_ranking(self._db, query, k)

    def search(self, query: str, k: int = 8, *, vector_ranking: Sequence[int] | None = None) -> list[Hit]:
        """The `k` chunks that best match `query`, best first.

        The query is a person's words, never FTS5 syntax (fts_query.py). `vector_ranking` is the seam for
        semantic search: chunk ids ranked best first by another retriever (the chunks' embeddings nearest the
        question's); when given, it is fused with the keyword ranking by reciprocal rank fusion and each hit's
        score is the fused one (vector_ranking() gives one from the index's own embeddings).
        """
        if k <= 0:
            return []
        expression = match_expression(query)
        depth = max(k, FUSION_DEPTH) if vector_ranking else k
        keyword: list[tuple[int, float]] = []
        if expression is not None:
            keyword = [(chunk_id, -rank) for chunk_id, rank in self._db.execute(
                f"SELECT rowid, {_BM25} AS rank FROM chunks_fts WHERE chunks_fts MATCH ? "
                "ORDER BY rank LIMIT ?", (expression, depth))]
        if vector_ranking:
            fused = reciprocal_rank_fusion([[chunk_id for chunk_id, _ in keyword], list(vector_ranking)])
            ranked = fused[:k]
        else:
            ranked = keyword[:k]
        return self._hits(ranked)

    def _hits(self, ranked: list[tuple[int, float]]) -> list[Hit]:
        if not ranked:
            return []
        ids = [chunk_id for chunk_id, _ in ranked]
        rows = self._db.execute(
            'SELECT c.id, c.page, c.headings, c.start, c."end", c.text, d.name, d.kind, '
            "(SELECT min(path) FROM sources s WHERE s.sha256 = c.sha256) "
            f"FROM chunks c JOIN documents d USING (sha256) WHERE c.id IN ({','.join('?' * len(ids))})",
            ids).fetchall()
        by_id = {row[0]: row for row in rows}
        hits = []
        for chunk_id, score in ranked:
            row = by_id.get(chunk_id)
            if row is None:  # a vector ranking may name a chunk removed since
                continue
            _, page, headings, start, end, text, name, kind, source = row
            hits.append(Hit(chunk_id, score, source or name, name, kind, page, tuple(json.loads(headings)),
                            start, end, text))
        return hits


def _chunk_row(sha256: str, chunk: Chunk) -> tuple[object, ...]:
    return (sha256, chunk.ordinal, chunk.page, json.dumps(list(chunk.headings)), chunk.context, chunk.start,
            chunk.end, chunk.text, chunk.tokens)

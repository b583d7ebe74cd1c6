"""Chunk embeddings in the document index, and the ranking they give a question.

Each chunk may have one vector (float32, scaled to unit length), made by one embedding model for the whole
index; `vector_model` names it and its dimension. When the model or its dimension changes, every vector is
dropped and the chunks are embedded again (`use_vector_model` says so): vectors of two models do not
compare. A chunk removed takes its vector with it (ON DELETE CASCADE).

The ranking is cosine similarity, read in batches with a running top-k, so its memory stays bounded however
many chunks there are: a scan of every vector, as sqlite-vec's own vec0 tables do without an ANN index.
(sqlite-vec itself cannot be loaded here: the Python this app runs on may be built without loadable SQLite
extensions, as the development machine's is.) 100,000 vectors of 384 dimensions scan in well under a second.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

# Rows read per step of a scan: 8,192 vectors of 1,024 floats are 32 MB.
SCAN_BATCH = 8192


def vector_model(db: sqlite3.Connection) -> tuple[str, int] | None:
    """(model, dimension) of the index's vectors, or None when it has none."""
    row = db.execute("SELECT model, dim FROM vector_model WHERE id = 1").fetchone()
    return (row[0], row[1]) if row else None


def use_vector_model(db: sqlite3.Connection, model: str, dim: int) -> bool:
    """Make `model` (of `dim` dimensions) the index's; True when vectors of another model or dimension were
    dropped (they are made again). Call inside a transaction."""
    known = vector_model(db)
    if known == (model, dim):
        return False
    dropped = db.execute("SELECT count(*) FROM vectors").fetchone()[0] > 0
    db.execute("DELETE FROM vectors")
    db.execute("INSERT OR REPLACE INTO vector_model (id, model, dim) VALUES (1, ?, ?)", (model, dim))
    return dropped


def chunks_without_vectors(db: sqlite3.Connection, limit: int) -> list[tuple[int, str]]:
    """Up to `limit` chunks (id, text with its context) that have no vector yet, in id order."""
    return [(row[0], f"{row[1]}\n{row[2]}" if row[1] else row[2]) for row in db.execute(
        "SELECT c.id, c.context, c.text FROM chunks c LEFT JOIN vectors v ON v.chunk_id = c.id "
        "WHERE v.chunk_id IS NULL ORDER BY c.id LIMIT ?", (limit,))]


def put_vectors(db: sqlite3.Connection, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
    """Store one vector per chunk (rows of `vectors`, scaled to unit length here). Call inside a transaction."""
    matrix = _unit(np.asarray(vectors, dtype=np.float32))
    db.executemany("INSERT OR REPLACE INTO vectors (chunk_id, vector) VALUES (?, ?)",
                   [(chunk_id, row.tobytes()) for chunk_id, row in zip(chunk_ids, matrix, strict=True)])


def vector_counts(db: sqlite3.Connection) -> tuple[int, int]:
    """(chunks with a vector, chunks)."""
    return (db.execute("SELECT count(*) FROM vectors").fetchone()[0],
            db.execute("SELECT count(*) FROM chunks").fetchone()[0])


def vector_ranking(db: sqlite3.Connection, query: np.ndarray, k: int) -> list[int]:
    """The ids of the `k` chunks whose vectors are nearest `query` (cosine), nearest first; [] without
    vectors or for a query of another dimension."""
    known = vector_model(db)
    query = _unit(np.asarray(query, dtype=np.float32).reshape(1, -1))[0]
    if known is None or known[1] != query.shape[0] or k <= 0:
        return []
    best_ids = np.empty(0, dtype=np.int64)
    best_scores = np.empty(0, dtype=np.float32)
    cursor = db.execute("SELECT chunk_id, vector FROM vectors")
    width = 4 * known[1]
    while batch := cursor.fetchmany(SCAN_BATCH):
        rows = [r for r in batch if isinstance(r[1], bytes) and len(r[1]) == width]  # a damaged row is passed over
        if not rows:
            continue
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = matrix @ query
        best_ids = np.concatenate([best_ids, ids])
        best_scores = np.concatenate([best_scores, scores])
        if len(best_ids) > k:
            keep = np.argpartition(-best_scores, k)[:k]
            best_ids, best_scores = best_ids[keep], best_scores[keep]
    order = np.argsort(-best_scores, kind="stable")
    return [int(i) for i in best_ids[order]]


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)

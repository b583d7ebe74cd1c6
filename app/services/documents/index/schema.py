"""The index's tables. A document is its content: `documents` is keyed by the sha256 of the file's bytes,
so a file is indexed again only when its bytes change, and two copies of one file are indexed once.
`sources` maps each path to the content it held when it was last read (with its size and mtime, so an
unchanged file is skipped without being hashed). Chunks belong to a document and go with it (foreign keys
with ON DELETE CASCADE); the FTS5 table indexes the chunks' text and context without storing them twice
(an external-content table, kept in step by triggers, which SQLite also fires for cascaded deletes).
Its tokenizer folds case and accents and stems English words (Porter), so "parsed" finds "parse" and
"invoices" finds "invoice"; other languages are matched word for word. A chunk's embedding, where an
embedding model made one, is a row of `vectors` (float32, unit length), going with its chunk; `vector_model`
names the one model they all come from, and its dimension (vectors.py).
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    sha256     TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    pages      INTEGER,
    chars      INTEGER NOT NULL,
    warnings   TEXT NOT NULL DEFAULT '[]',
    indexed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sources (
    path     TEXT PRIMARY KEY,
    sha256   TEXT NOT NULL REFERENCES documents(sha256) ON DELETE CASCADE,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sources_by_sha256 ON sources(sha256);
CREATE TABLE IF NOT EXISTS chunks (
    id       INTEGER PRIMARY KEY,
    sha256   TEXT NOT NULL REFERENCES documents(sha256) ON DELETE CASCADE,
    ordinal  INTEGER NOT NULL,
    page     INTEGER,
    headings TEXT NOT NULL,
    context  TEXT NOT NULL,
    start    INTEGER NOT NULL,
    "end"    INTEGER NOT NULL,
    text     TEXT NOT NULL,
    tokens   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_sha256 ON chunks(sha256, ordinal);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, context, content='chunks', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, context) VALUES (new.id, new.text, new.context);
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, context) VALUES ('delete', old.id, old.text, old.context);
END;
CREATE TABLE IF NOT EXISTS vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    vector   BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS vector_model (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    model TEXT NOT NULL,
    dim   INTEGER NOT NULL
);
"""


class IndexVersionError(RuntimeError):
    """The index file was written by a newer Tailor."""


def open_index_db(path: str) -> sqlite3.Connection:
    """A connection to the index at `path`, created or checked; WAL, foreign keys on."""
    connection = sqlite3.connect(path, isolation_level=None)  # transactions are explicit (store.py)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("PRAGMA synchronous=NORMAL")  # an index can be rebuilt; the history cannot
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise IndexVersionError(f"{path} is a document index of a newer Tailor (version {version}); "
                                    f"this one reads version {SCHEMA_VERSION}")
        connection.executescript(_SCHEMA)
        connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        connection.close()
        raise
    return connection

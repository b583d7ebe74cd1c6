"""The document index: one SQLite file (the caller picks where, e.g. beside the history database).

  schema.py     the tables: documents keyed by content hash, the paths (sources) that hold them, chunks,
                and an FTS5 table over the chunks kept in step by triggers
  store.py      DocumentIndex: add a document's chunks, link a path to known content, remove, search
  fts_query.py  a user's words turned into an FTS5 query that cannot be a syntax error
  fusion.py     reciprocal rank fusion: where a vector ranking (sqlite-vec, later) joins the keyword one
"""

"""Chat with your files (issue 36), the foundation: documents read safely, cut into passages by their
structure, and kept in a full-text index that answers "which passages speak of this?".

It lives in app/services because it belongs to the chats (not to model files, which is what models/ is
about) and because the window, `tailor chat` and `tailor serve` will all use it: so no Qt here (the
import-linter contract for app.services says so), and no torch or llama_cpp (a tokenizer, when there is
one, is passed in as a plain function that counts tokens).

  limits.py      every cap, one named constant each, gathered in DocumentLimits
  errors.py      what is refused, one class per reason, each one line naming the file and the cap
  files.py       a path opened without blocking (FIFO, device) or following a link swapped in, its size
                 checked before any byte is read
  text.py        bytes told from text (NUL bytes, invalid UTF-8), decoded
  document.py    Document and Block: the extracted text and its structure (headings, pages, offsets)
  formats/       one extractor per kind of file: plain text and code, Markdown, HTML, PDF, DOCX, CSV
  extract.py     a path in, a Document out: the kind told by the extension, the right extractor run
  chunking.py    Blocks into Chunks within a token budget, with overlap, each knowing its page, heading
                 path and character offsets
  index/         the SQLite index: documents keyed by content hash, chunks, FTS5 with BM25; the seam
                 where a vector ranking will be fused in
  indexing.py    a folder walked (walk.py: no links followed) and indexed one file at a time, with progress
                 and a cancel flag
  knowledge.py   named indexes in the data folder (`tailor index FOLDER --name NAME`, `--knowledge NAME`)

What of them goes into a message (whole, or passages cited as [n]) is app/chat/document_context.py's.
"""

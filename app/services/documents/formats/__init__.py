"""One extractor per kind of file; each is `extract(name, file, limits) -> Document` on an open binary file.

  plain.py     plain text, logs and source code: paragraphs at blank lines
  markdown.py  Markdown: ATX and setext headings, paragraphs, lists, fences and tables as blocks
  html.py      HTML (the standard library's parser): headings, paragraphs, list items and table rows;
               scripts, styles and the head dropped
  pdf.py       PDF (pypdf): page by page, so every chunk knows its page; pages without a text layer named
  docx.py      Word (python-docx): paragraphs with their heading styles, tables row by row; the zip's
               declared size checked before anything is unpacked
  csv_rows.py  CSV and TSV: a row a block, the header row repeated at the top of every chunk
"""

"""A user's question as an FTS5 MATCH expression that is never a syntax error.

FTS5 gives meaning to quotes, AND/OR/NOT/NEAR, `*`, `^`, `:` (column filters), `+` and parentheses; a
question typed by a person holds them by accident ("what's 'NEAR' (the tool)?"). So the query is cut into
words the way the index's unicode61 tokenizer cuts text (runs of letters and digits), each word is quoted
(an FTS5 string: only ever a term), and the words are joined with OR: BM25 then ranks the passages that
hold the most, and rarest, of them first, so "the" and "what" count for little and no single word
missing from a passage empties the result.
"""

from __future__ import annotations

import re

# Runs of letters, digits and marks: what unicode61 keeps as a token (an underscore separates tokens).
_WORD = re.compile(r"[^\W_]+")

# A pasted page is not a query: past this many distinct words, the rest add little but cost time.
MAX_QUERY_WORDS = 64


def match_expression(query: str) -> str | None:
    """The MATCH expression for `query`, or None when it holds no word to look for."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))[:MAX_QUERY_WORDS]
    if not words:
        return None
    return " OR ".join(f'"{word}"' for word in words)

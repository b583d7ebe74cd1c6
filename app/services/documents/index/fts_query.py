"""A user's question as an FTS5 MATCH expression that is never a syntax error.

FTS5 gives meaning to quotes, AND/OR/NOT/NEAR, `*`, `^`, `:` (column filters), `+` and parentheses; a
question typed by a person holds them by accident ("what's 'NEAR' (the tool)?"). So the query is cut into
words the way the index's unicode61 tokenizer cuts text (runs of letters and digits), each word is quoted
(an FTS5 string: only ever a term), and the words are joined with OR: BM25 then ranks the passages that
hold the most, and rarest, of them first, and no single word missing from a passage empties the result.

The commonest English function words are left out of a question that has other words: BM25 weighs a word
by its rarity, and in a small index (a handful of files) "the" or "what" can be rare enough to outrank
the words that matter. A query of nothing but such words ("The Who") is searched as it is.
"""

from __future__ import annotations

import re

# Runs of letters, digits and marks: what unicode61 keeps as a token (an underscore separates tokens).
_WORD = re.compile(r"[^\W_]+")

# A pasted page is not a query: past this many distinct words, the rest add little but cost time.
MAX_QUERY_WORDS = 64

_STOP_WORDS = (
    "a an and are as at be by can did do does for from had has have how i if in into is it its me my of on or "
    "our so than that the their them then there these they this those to was we were what when where which "
    "who whom why will with would you your")
STOP_WORDS = frozenset(_STOP_WORDS.split())


def match_expression(query: str) -> str | None:
    """The MATCH expression for `query`, or None when it holds no word to look for."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))
    words = [word for word in words if word not in STOP_WORDS] or words
    if not words:
        return None
    words = words[:MAX_QUERY_WORDS]
    return " OR ".join(f'"{word}"' for word in words)

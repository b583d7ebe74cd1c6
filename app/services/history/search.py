"""What a search of the history looks at in a reply's tool steps: what the model wrote, not what tools answered.

A step's text (and, where a search reads reasoning, its reasoning) is the model's own writing, as a
message's content is; a call's name and arguments say what it did ("read_file", "notes.txt"). Results
are left out: a tool's answer may be a whole file or web page, which would make every chat that read
it match, and it is the tool's text, not the chat's. The steps are JSON in their column
(tool_steps.py); SQLite's json_tree walks them, and a damaged value (not JSON) matches nothing
instead of failing the search.
"""

from __future__ import annotations

import json

# The keys of a step, or of a call in it, whose text a search finds.
WRITTEN_KEYS = ("text", "name", "arguments")
WRITTEN_AND_THOUGHT_KEYS = (*WRITTEN_KEYS, "reasoning")


def like_pattern(query: str) -> str:
    """A LIKE pattern (escaped with '\\') that matches text containing `query`."""
    return "%" + query.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def json_like_pattern(query: str) -> str:
    """A LIKE pattern that matches the JSON text (as steps_to_json writes it) of any text containing `query`:
    JSON writes each character on its own ('"' as '\\"'), so text holding the query is JSON holding the query
    written so. Checked first, it spares parsing the steps of a reply that cannot match."""
    return like_pattern(json.dumps(query.strip(), ensure_ascii=False)[1:-1])


def steps_match(column: str, pattern: str, json_pattern: str, keys: tuple[str, ...] = WRITTEN_KEYS) -> str:
    """An SQL condition: the steps in `column` hold, under one of `keys`, text matching LIKE `pattern` (an SQL
    parameter such as "?1", from like_pattern); `json_pattern` (from json_like_pattern) is checked first."""
    names = ", ".join(f"'{key}'" for key in keys)
    return (f"({column} LIKE {json_pattern} ESCAPE '\\' AND EXISTS (SELECT 1 FROM json_tree(CASE WHEN"
            f" json_valid({column}) THEN {column} ELSE '[]' END) t WHERE t.type = 'text' AND t.key IN ({names})"
            f" AND t.value LIKE {pattern} ESCAPE '\\'))")

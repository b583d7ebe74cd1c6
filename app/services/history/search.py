"""What a search of the history looks at in a reply's tool steps: what the model wrote, not what tools answered.

A step's text (and, where a search reads reasoning, its reasoning) is the model's own writing, as a
message's content is; a call's name and arguments say what it did ("read_file", "notes.txt"). Results
are left out: a tool's answer may be a whole file or web page, which would make every chat that read
it match, and it is the tool's text, not the chat's. The steps are JSON in their column
(tool_steps.py); SQLite's json_tree walks them, and a damaged value (not JSON) matches nothing
instead of failing the search.
"""

from __future__ import annotations

# The keys of a step, or of a call in it, whose text a search finds.
WRITTEN_KEYS = ("text", "name", "arguments")
WRITTEN_AND_THOUGHT_KEYS = (*WRITTEN_KEYS, "reasoning")


def steps_match(column: str, pattern: str, keys: tuple[str, ...] = WRITTEN_KEYS) -> str:
    """An SQL condition: the steps in `column` hold, under one of `keys`, text matching LIKE `pattern`
    (an SQL parameter such as "?1", escaped with '\\')."""
    names = ", ".join(f"'{key}'" for key in keys)
    return (f"({column} != '' AND EXISTS (SELECT 1 FROM json_tree(CASE WHEN json_valid({column}) THEN {column}"
            f" ELSE '[]' END) t WHERE t.type = 'text' AND t.key IN ({names}) AND t.value LIKE {pattern} ESCAPE '\\'))")

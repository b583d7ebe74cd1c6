"""The one error of structured output, and how it names a place in a schema."""

from __future__ import annotations

# A place in a schema: the keys and indexes from the root, e.g. ("properties", "tags").
Where = tuple[str | int, ...]


class SchemaError(ValueError):
    """A schema that structured output cannot turn into a grammar; the message names the keyword and where."""


def pointer(where: Where) -> str:
    """The JSON pointer of a place, as a URI fragment: ("properties", "a/b") -> "#/properties/a~1b"."""
    parts = [str(part).replace("~", "~0").replace("/", "~1") for part in where]
    return "#" + "".join("/" + part for part in parts)


def shown(value: object, limit: int = 60, quoted: bool = True) -> str:
    """A value as an error message quotes it (its repr, or its text), cut short when long."""
    text = repr(value) if quoted else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def unsupported(keyword: str, where: Where, why: str = "", detail: str = "") -> SchemaError:
    """The error for a keyword structured output refuses: "'minimum' 0.5 on a number (at #/x) is not supported: ..."."""
    tail = f": {why}" if why else " in structured output"
    return SchemaError(f"'{keyword}'{detail} (at {pointer(where)}) is not supported{tail}")

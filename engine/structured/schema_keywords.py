"""Which JSON Schema keywords structured output knows, and small checks on their values."""

from __future__ import annotations

import math

from engine.structured.errors import SchemaError, Where, pointer, shown
from engine.structured.gbnf import MAX_REPEAT

# Keywords that say nothing about which values are valid.
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions",
})

# Keywords that constrain values, per the type they apply to; without "type", a schema's
# types are those its keywords apply to (see the module docstring of json_schema_grammar).
TYPE_KEYWORDS = {
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "prefixItems", "additionalItems", "minItems", "maxItems"}),
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
}
COMBINATORS = frozenset({"anyOf", "oneOf", "allOf", "$ref"})
SUPPORTED = frozenset({"type", "enum", "const"}).union(COMBINATORS, *TYPE_KEYWORDS.values())

JSON_TYPES = ("null", "boolean", "object", "array", "string", "integer", "number")
FORMATS = ("date", "time", "date-time", "uuid")


def constraints(schema: dict) -> dict:
    """The keywords of `schema` that constrain values (annotations, and uniqueItems false, left out)."""
    return {key: value for key, value in schema.items()
            if key not in ANNOTATIONS and (key, value) != ("uniqueItems", False)}


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_whole(value: object) -> bool:
    """A number with no fraction (1.0 is one), never converted: JSON's ints may be too big for a float."""
    return is_number(value) and (isinstance(value, int) or value.is_integer())  # type: ignore[union-attr]


def has_type(value: object, type_name: str) -> bool:
    """Whether a JSON value is of a JSON Schema type (1.0 is an integer, True is not a number)."""
    if type_name == "integer":
        return is_whole(value)
    checks = {
        "null": value is None, "boolean": isinstance(value, bool), "number": is_number(value),
        "string": isinstance(value, str), "array": isinstance(value, list), "object": isinstance(value, dict),
    }
    return checks[type_name]


def json_equal(a: object, b: object) -> bool:
    """Equality as JSON Schema has it: 1 == 1.0, but True != 1."""
    if is_number(a) and is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    return a == b


def schema_types(schema: dict, where: Where) -> list[str]:
    """The JSON types a schema allows, "number" standing for "integer" too when both are there."""
    if "type" not in schema:
        present = [name for name, keywords in TYPE_KEYWORDS.items() if keywords & schema.keys()]
        return present or [name for name in JSON_TYPES if name != "integer"]
    declared = schema["type"]
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not names or any(name not in JSON_TYPES for name in names):
        raise SchemaError(f"'type' {declared!r} (at {pointer(where)}) is not a JSON type or a list of them")
    if "number" in names:
        names = [name for name in names if name != "integer"]
    return list(dict.fromkeys(names))


def count(schema: dict, key: str, where: Where, default: int | None = None) -> int | None:
    """A count keyword (minLength, maxItems, ...): a whole number from 0 to MAX_REPEAT."""
    if key not in schema:
        return default
    value = schema[key]
    if not is_whole(value) or value < 0:
        raise SchemaError(f"'{key}' {shown(value)} (at {pointer(where)}) must be a whole number, 0 or more")
    if value > MAX_REPEAT:
        raise SchemaError(f"'{key}' {shown(value)} (at {pointer(where)}) is over the limit of {MAX_REPEAT:,}")
    return int(value)


def bound(schema: dict, key: str, where: Where) -> float | int | None:
    """A numeric bound keyword, checked to be a finite number."""
    if key not in schema:
        return None
    value = schema[key]
    if not is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        raise SchemaError(f"'{key}' {shown(value)} (at {pointer(where)}) must be a number")
    return value


def schema_list(schema: dict, key: str, where: Where) -> list:
    value = schema[key]
    if not isinstance(value, list) or not value:
        raise SchemaError(f"'{key}' (at {pointer(where)}) must be a non-empty list of schemas")
    return value

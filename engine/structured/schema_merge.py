"""Schemas that must all hold at once (allOf; the siblings of $ref, anyOf, oneOf) merged into one.

Exact for what it accepts, and refusing the rest:
- a keyword found in one part only is kept as it is;
- "type": the types every part allows ("integer" is within "number");
- "required": all of them; "properties": all of them, a property in several parts merged alike;
- "additionalProperties": false in a part forbids, in the result, every property that part
  does not declare; a schema there merges only when no other part declares other properties;
- "items" and "prefixItems" from different parts are refused (each changes what the other means);
- bounds: the strictest; "enum": the values every part allows; "const": equal, or nothing;
- "allOf": the lists joined; any other keyword in several parts must be equal in all.
A merge that no value can satisfy gives False.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.structured.errors import SchemaError, Where, pointer
from engine.structured.schema_keywords import constraints, is_number, json_equal

_MISSING = object()
_STRICTEST = {
    "minimum": max, "exclusiveMinimum": max, "minLength": max, "minItems": max,
    "maximum": min, "exclusiveMaximum": min, "maxLength": min, "maxItems": min,
}
_ARRAY_SHAPE = ("items", "prefixItems", "additionalItems")
# "number" is the integers and the other numbers; the rest are themselves.
_NUMBER_PARTS = {"number": {"integer", "fraction"}, "integer": {"integer"}}


class _NoValue(Exception):
    """Raised inside a merge when the parts contradict each other."""


def _types(value: object) -> set[str]:
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    out: set[str] = set()
    for name in names:
        out |= _NUMBER_PARTS.get(name, {name}) if isinstance(name, str) else set()
    return out


def _type_list(atoms: set[str]) -> list[str]:
    names = sorted(atoms - {"integer", "fraction"})
    if {"integer", "fraction"} <= atoms:
        names.append("number")
    elif "integer" in atoms:
        names.append("integer")
    return names


def _combine(key: str, a: object, b: object, where: Where) -> object:
    if key == "type":
        both = _types(a) & _types(b)
        if not both:
            raise _NoValue
        return _type_list(both)
    if key == "required" and isinstance(a, list) and isinstance(b, list):
        return list(dict.fromkeys(a + b))
    if key == "allOf" and isinstance(a, list) and isinstance(b, list):
        return a + b
    if key == "enum" and isinstance(a, list) and isinstance(b, list):
        kept = [value for value in a if any(json_equal(value, other) for other in b)]
        if not kept:
            raise _NoValue
        return kept
    if key in _STRICTEST and is_number(a) and is_number(b):
        return _STRICTEST[key](a, b)
    if json_equal(a, b):
        return a
    if key == "const":
        raise _NoValue
    raise SchemaError(f"'{key}' (at {pointer(where)}) differs between schemas that must all hold, "
                      "so they cannot be merged into one for structured output")


def merge(parts: list, where: Where, resolve: Callable[[object], object]) -> dict | bool:
    """One schema that holds exactly when all `parts` do; `resolve` follows a part's top-level $ref."""
    flat: list[dict] = []
    for part in parts:
        part = resolve(part)
        if part is False:
            return False
        if isinstance(part, dict):
            flat.append(constraints(part))
    result: dict = {}
    shape_from: dict[str, int] = {}
    try:
        for index, part in enumerate(flat):
            for key, value in part.items():
                if key in ("properties", "additionalProperties"):
                    continue
                if key in _ARRAY_SHAPE:
                    shape_from.setdefault(key, index)
                result[key] = _combine(key, result[key], value, where) if key in result else value
    except _NoValue:
        return False
    if len(set(shape_from.values())) > 1:
        raise SchemaError(f"'items' and 'prefixItems' (at {pointer(where)}) come from different schemas "
                          "that must all hold; structured output cannot merge them")
    _merge_objects(flat, result, where, resolve)
    return result


def _merge_objects(flat: list[dict], result: dict, where: Where, resolve) -> None:
    if not any("properties" in part or "additionalProperties" in part for part in flat):
        return
    properties: dict = {}
    for part in flat:
        for key, sub in (part.get("properties") or {}).items():
            at = (*where, "properties", key)
            properties[key] = merge([properties[key], sub], at, resolve) if key in properties else sub
    extras = []
    for part in flat:
        extra = part.get("additionalProperties", _MISSING)
        declared = set(part.get("properties") or {})
        if extra is False:
            for key in properties:
                if key not in declared:
                    properties[key] = False  # this part forbids it, so it must be absent
        elif isinstance(extra, dict) and constraints(extra) and set(properties) - declared:
            raise SchemaError(f"'additionalProperties' (at {pointer(where)}) as a schema cannot be merged "
                              "with the properties of other schemas that must all hold")
        if extra is not _MISSING:
            extras.append(extra)
    if any(isinstance(part.get("properties"), dict) for part in flat):
        result["properties"] = properties
    if extras:
        result["additionalProperties"] = _merge_extras(extras, where)


def _merge_extras(extras: list, where: Where) -> object:
    if any(extra is False for extra in extras):
        return False
    schemas = [extra for extra in extras if isinstance(extra, dict) and constraints(extra)]
    if not schemas:
        return True
    if any(not json_equal(schema, schemas[0]) for schema in schemas):
        raise SchemaError(f"'additionalProperties' (at {pointer(where)}) differs between schemas that must "
                          "all hold, so they cannot be merged into one for structured output")
    return schemas[0]

"""The type keywords: one GBNF expression per JSON type a schema allows (objects: schema_objects).

Whitespace (`ws`, json_primitives) goes between the tokens of arrays, never twice in a row,
so there is one way to read it. Strings count characters, whatever their escapes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from engine.structured.errors import SchemaError, Where, pointer, shown, unsupported
from engine.structured.gbnf import alt, repeat, seq
from engine.structured.json_primitives import FORMAT_LENGTHS, shared
from engine.structured.number_ranges import (
    INTEGER_DIGITS,
    MAX_DECIMAL_BOUND,
    MAX_INTEGER,
    Bound,
    decimal_range,
    integer_range,
)
from engine.structured.regex_grammar import LengthError, PatternError, pattern_grammar
from engine.structured.schema_keywords import bound, count, is_whole, schema_types
from engine.structured.schema_objects import object_expr

if TYPE_CHECKING:
    from engine.structured.schema_rules import SchemaCompiler

QUOTE = '"\\""'
_ANY = {"null", "boolean", "object", "array", "string", "number"}


def typed(c: SchemaCompiler, kept: dict, where: Where) -> str | None:
    """The alternatives of every type `kept` allows, each with the keywords of its type."""
    types = schema_types(kept, where)
    if set(types) == _ANY and "type" not in kept:
        return shared(c.rules, "value")
    makers = {"null": lambda: '"null"', "boolean": lambda: shared(c.rules, "boolean"),
              "integer": lambda: integer_expr(c, kept, where), "number": lambda: number_expr(c, kept, where),
              "string": lambda: string_expr(c, kept, where), "array": lambda: array_expr(c, kept, where),
              "object": lambda: object_expr(c, kept, where)}
    options = [expr for expr in (makers[name]() for name in types) if expr is not None]
    return alt(options) if options else None


# --- numbers -----------------------------------------------------------------------------------

def _integer_bounds(kept: dict, where: Where) -> tuple[int | None, int | None]:
    """The inclusive integer bounds: a minimum of 0.5 is 1, an exclusiveMaximum of 10 is 9."""
    lows: list[tuple[int, str]] = []
    highs: list[tuple[int, str]] = []
    for key, whole, into in (("minimum", math.ceil, lows), ("exclusiveMinimum", lambda v: math.floor(v) + 1, lows),
                             ("maximum", math.floor, highs), ("exclusiveMaximum", lambda v: math.ceil(v) - 1, highs)):
        value = bound(kept, key, where)
        if value is not None:
            into.append((whole(value), key))
    low, high = max(lows, default=None), min(highs, default=None)
    # Integers have at most INTEGER_DIGITS digits (number_ranges): a bound beyond them asks nothing
    # more, but a range that lies wholly beyond them has no integer the grammar can write.
    for found, outside in ((low, low is not None and low[0] > MAX_INTEGER),
                           (high, high is not None and high[0] < -MAX_INTEGER)):
        if outside:
            key = found[1]  # type: ignore[index]
            raise unsupported(key, where, f"integers have at most {INTEGER_DIGITS} digits in structured output "
                                          f"(up to {MAX_INTEGER:,} either side of 0)", f" {shown(kept[key])}")
    return (low[0] if low else None), (high[0] if high else None)


def integer_expr(c: SchemaCompiler, kept: dict, where: Where) -> str | None:
    low, high = _integer_bounds(kept, where)
    if low is None and high is None:
        return shared(c.rules, "integer")
    expr = integer_range(low, high)
    return c.rules.add(c.hint(where, "int"), expr) if expr else None


def _whole_bound(kept: dict, key: str, where: Where) -> Bound | None:
    value = bound(kept, key, where)
    if value is None:
        return None
    if not is_whole(value):
        raise unsupported(key, where, "only whole-number bounds are", f" {shown(value)} on a number")
    return Bound(int(value), key.startswith("exclusive"))


def number_expr(c: SchemaCompiler, kept: dict, where: Where) -> str | None:
    lows = [(b, k) for k in ("minimum", "exclusiveMinimum") if (b := _whole_bound(kept, k, where))]
    highs = [(b, k) for k in ("maximum", "exclusiveMaximum") if (b := _whole_bound(kept, k, where))]
    if not lows and not highs:
        return shared(c.rules, "number")
    # The stricter of two lower bounds is the larger one, exclusive before inclusive at a tie.
    low = max(lows, key=lambda p: (p[0].value, p[0].exclusive)) if lows else None
    high = min(highs, key=lambda p: (p[0].value, not p[0].exclusive)) if highs else None
    # Bounded decimals have at most 15 integer digits (number_ranges): a bound beyond 10**15 asks
    # nothing more and is left open; a range wholly beyond it has no decimal the grammar can write.
    for found, outside in ((low, low is not None and low[0].value > MAX_DECIMAL_BOUND),
                           (high, high is not None and high[0].value < -MAX_DECIMAL_BOUND)):
        if outside:
            key = found[1]  # type: ignore[index]
            raise unsupported(key, where, "bounds up to 10**15 either side of 0 are", f" {shown(kept[key])} on a number")
    expr = decimal_range(low[0] if low and low[0].value >= -MAX_DECIMAL_BOUND else None,
                         high[0] if high and high[0].value <= MAX_DECIMAL_BOUND else None)
    return c.rules.add(c.hint(where, "num"), expr) if expr else None


# --- strings -----------------------------------------------------------------------------------

def string_expr(c: SchemaCompiler, kept: dict, where: Where) -> str | None:
    min_len = count(kept, "minLength", where, 0)
    max_len = count(kept, "maxLength", where)
    if max_len is not None and min_len > max_len:
        return None
    if "format" in kept:
        return _format_expr(c, kept, where, min_len, max_len)
    if "pattern" in kept:
        pattern = kept["pattern"]
        if not isinstance(pattern, str):
            raise SchemaError(f"'pattern' (at {pointer(where)}) must be a string")
        try:
            inside = pattern_grammar(pattern, c.rules, min_len, max_len, c.hint(where, "pat"))
        except LengthError as error:
            raise unsupported("pattern", where, str(error), f" {shown(pattern)} with 'minLength'/'maxLength'") from None
        except PatternError as error:
            raise unsupported("pattern", where, f"it has {error}", f" {shown(pattern)}") from None
        return c.rules.add(c.hint(where, "str"), seq(QUOTE, inside, QUOTE)) if inside is not None else None
    if min_len == 0 and max_len is None:
        return shared(c.rules, "string")
    chars = repeat(c.rules, shared(c.rules, "char"), min_len, max_len, c.hint(where, "chars"))
    return c.rules.add(c.hint(where, "str"), seq(QUOTE, chars, QUOTE))


def _format_expr(c: SchemaCompiler, kept: dict, where: Where, min_len: int, max_len: int | None) -> str | None:
    fmt = kept["format"]  # one of FORMATS (SchemaCompiler checked)
    if "pattern" in kept:
        raise unsupported("pattern", where, detail=f" together with 'format' {fmt!r}")
    shortest, longest = FORMAT_LENGTHS[fmt]
    if (max_len is not None and max_len < shortest) or min_len > longest:
        return None
    if min_len > shortest or (max_len is not None and max_len < longest):
        raise unsupported("maxLength" if "maxLength" in kept else "minLength", where,
                          "it would cut into the lengths the format allows", f" with 'format' {fmt!r}")
    return shared(c.rules, f"format-{fmt}")


# --- arrays ------------------------------------------------------------------------------------

def _array_shape(kept: dict, where: Where) -> tuple[list, object]:
    """(prefixItems, items) whether written the 2020-12 way or with an array `items` (draft 7)."""
    items = kept.get("items", True)
    prefix = kept.get("prefixItems", [])
    if isinstance(items, list):
        if "prefixItems" in kept:
            raise unsupported("items", where, detail=" as a list together with 'prefixItems'")
        return items, kept.get("additionalItems", True)
    if "additionalItems" in kept:
        raise unsupported("additionalItems", where, detail=" without a list of schemas in 'items'")
    if not isinstance(prefix, list):
        raise SchemaError(f"'prefixItems' (at {pointer(where)}) must be a list of schemas")
    return prefix, items


def array_expr(c: SchemaCompiler, kept: dict, where: Where) -> str | None:
    prefix_schemas, items_schema = _array_shape(kept, where)
    least = count(kept, "minItems", where, 0)
    most = count(kept, "maxItems", where)
    prefix = []
    for i, schema in enumerate(prefix_schemas):
        expr = c.node(schema, (*where, "prefixItems", i))
        if expr is None:  # no value fits position i, so the array stops before it
            items_schema = False
            break
        prefix.append(c.rules.symbol(c.hint((*where, i)), expr))
    items = c.node(items_schema, (*where, "items"))
    items = c.rules.symbol(c.hint((*where, "items")), items) if items is not None else None
    if items is None:
        most = len(prefix) if most is None else min(most, len(prefix))
    prefix = prefix[:most] if most is not None else prefix
    if most is not None and least > most:
        return None
    ws = shared(c.rules, "ws")
    if most == 0:
        return seq('"["', ws, '"]"')
    hint = c.hint(where)
    # Built from the end: after the last prefix element, more `items`; before, each prefix
    # element after its comma, required up to minItems and optional (with all after it) beyond.
    start = max(len(prefix), 1)
    rest = ""
    if items is not None:
        more = c.rules.add(f"{hint}-more", seq(ws, '","', ws, items))
        rest = repeat(c.rules, more, max(least - start, 0), None if most is None else most - start, f"{hint}-more")
    for i in reversed(range(1, len(prefix))):
        piece = seq(ws, '","', ws, prefix[i], rest)
        rest = piece if i < least else c.rules.add(f"{hint}-from-{i}", piece) + "?"
    body = seq(prefix[0] if prefix else items, rest)
    if least == 0:
        return c.rules.add(hint, seq('"["', ws, c.rules.add(f"{hint}-items", seq(body, ws)) + "?", '"]"'))
    return c.rules.add(hint, seq('"["', ws, body, ws, '"]"'))

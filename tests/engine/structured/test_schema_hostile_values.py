"""Schemas a client can send to hurt the server: every keyword with every kind of JSON value, and
number bounds of hundreds of digits. Each is refused with a SchemaError that names the keyword, or
becomes a grammar llama.cpp takes; none raises anything else, and none costs more per token than
the 16-digit numbers the grammar writes anyway.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from engine.structured.json_schema_grammar import SchemaError, check_schema, schema_grammar
from engine.structured.number_ranges import MAX_INTEGER
from engine.structured.schema_keywords import ANNOTATIONS, SUPPORTED
from tests.engine.structured.test_json_schema_grammar import GrammarEngine, grammar_for

# One of each kind of JSON value, numbers at their edges: 10**400 is valid JSON and a Python int,
# but no float can hold it.
VALUES = [None, True, False, 0, -1, 7, 1.5, -0.0, 1e308, -1e308, 10**400, -(10**400), 10**300, "", "integer",
          [], [1], ["integer", "null"], {}, {"type": "integer"}, {"a": 1}, [[{"a": [None]}]]]
KEYWORDS = sorted(SUPPORTED | ANNOTATIONS | {"not", "uniqueItems", "multipleOf", "x-unknown"})
BASES = [{}, {"type": "integer"}, {"type": "number"}, {"type": "string"}, {"type": "array"}, {"type": "object"}]


@pytest.fixture(scope="module")
def engine() -> GrammarEngine:
    return GrammarEngine()


@pytest.mark.parametrize("base", BASES, ids=lambda b: b.get("type", "untyped"))
def test_every_keyword_with_every_json_value_is_a_grammar_or_a_schema_error(engine, base):
    grammars = set()
    for keyword in KEYWORDS:
        for value in VALUES:
            schema = {**base, keyword: value}
            try:
                check_schema(schema)
            except SchemaError as error:
                assert str(error), schema
                continue
            grammars.add(schema_grammar(schema))
    for grammar in grammars:
        assert engine.parses(grammar), grammar


@pytest.mark.parametrize("bounds", [
    {"minimum": -1e300, "maximum": 1e300},
    {"minimum": -(10**300), "maximum": 10**300},
    {"exclusiveMinimum": -(10**400), "exclusiveMaximum": 10**400},
    {"minimum": 0, "maximum": 10**300},
    {"maximum": 10**40},
    {"minimum": -(10**40), "maximum": 50},
])
def test_integer_bounds_past_16_digits_stay_exact_and_cheap(engine, bounds):
    schema = {"type": "integer", **bounds}
    grammar = grammar_for(engine, schema)
    # What llama.cpp pays per token grows with the alternatives: a bound of 300 digits made one per
    # length (24,517 characters, ~120 ms a token); past 16 digits it now asks nothing more.
    assert len(grammar) < 400, grammar
    validator = jsonschema.Draft202012Validator(schema)
    for n in [*range(-120, 121), MAX_INTEGER, -MAX_INTEGER, 10**15, -(10**15) - 7]:
        assert engine.accepts(grammar, str(n)) == validator.is_valid(n), n
    assert not engine.accepts(grammar, str(MAX_INTEGER + 1))  # narrower than the schema, never wider


def test_a_bound_past_16_digits_writes_the_same_grammar_as_16_digits():
    clamped = schema_grammar({"type": "integer", "minimum": -MAX_INTEGER, "maximum": MAX_INTEGER})
    assert schema_grammar({"type": "integer", "minimum": -(10**300), "maximum": 10**300}) == clamped
    assert schema_grammar({"type": "integer", "minimum": -1e300, "maximum": 1e300}) == clamped


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "integer", "minimum": 10**20},
     "'minimum' 100000000000000000000 (at #) is not supported: integers have at most 16 digits"),
    ({"properties": {"n": {"type": "integer", "exclusiveMaximum": -1e300}}},
     "'exclusiveMaximum' -1e+300 (at #/properties/n) is not supported: integers have at most 16 digits"),
    ({"type": "integer", "minimum": 10**300, "maximum": 10**300 + 5}, "'minimum' 1000000000000000000000"),
    ({"type": "number", "exclusiveMinimum": 10**300}, "on a number (at #) is not supported: bounds up to 10**15"),
    ({"type": "string", "maxLength": 10**400}, "'maxLength' 1000000000000000000000"),
])
def test_a_range_wholly_past_the_digits_is_refused_by_name(schema, message):
    with pytest.raises(SchemaError) as caught:
        check_schema(schema)
    assert message in str(caught.value)
    assert "(up to 9,999,999,999,999,999 either side of 0)" in str(caught.value) or "integer" not in str(schema)


def test_number_bounds_past_10_to_the_15_are_open(engine):
    schema = {"type": "number", "minimum": -1e300, "maximum": 10**400}
    grammar = grammar_for(engine, schema)
    for text in ("0", "-3.25", "999999999999999", "-999999999999999.5"):
        assert engine.accepts(grammar, text), text
    assert not engine.accepts(grammar, "1e300")  # no exponent with bounds: 15 integer digits at most


def test_a_schema_uri_that_is_not_a_string_is_refused():
    for value in (True, 1, [], {}):
        with pytest.raises(SchemaError, match="'\\$schema' \\(at #\\) must be a string"):
            check_schema({"$schema": value, "type": "integer"})


# --- many alternatives -------------------------------------------------------------------------

def _widest_rule(grammar: str) -> int:
    """The most alternatives one rule of the grammar offers (its '|', nested groups counted too)."""
    return max(line.count(" | ") + 1 for line in grammar.splitlines())


def test_an_enum_of_ten_thousand_values_is_exact_and_cheap(engine):
    # Written side by side, 10,000 values cost ~6 s a token (2,000: ~0.8 s): llama.cpp follows each.
    values = [f"w{i:05d}" for i in range(10_000)]
    grammar = grammar_for(engine, {"enum": values})
    assert len(grammar) < 2000 and _widest_rule(grammar) <= 11, grammar
    for text in ('"w00000"', '"w04567"', '"w09999"'):
        assert engine.accepts(grammar, text), text
    for text in ('"w10000"', '"w0000"', '"w000001"', '"w0000x"', "w00000", '"W00000"'):
        assert not engine.accepts(grammar, text), text


def test_values_that_begin_other_values_each_match_alone(engine):
    values = ["a", "ab", "abc", "b", 'a"b', "é", "", 1, 12, 123, 1.5, None, True, [1, 2], {"k": "v"}]
    schema = {"enum": values}
    good = [json.dumps(value, ensure_ascii=False, separators=(",", ":")) for value in values]
    bad = ['"abcd"', '"ac"', '"a', "1234", "13", "1.", "1.55", '"a\\"', "nul", "truee", "[1]", '{"k":"w"}']
    grammar = grammar_for(engine, schema)
    for text in good:
        assert engine.accepts(grammar, text), text
        jsonschema.validate(json.loads(text), schema)
    for text in bad:
        assert not engine.accepts(grammar, text), text


def test_a_chain_of_prefixes_is_as_deep_as_it_is_long(engine):
    grammar = grammar_for(engine, {"enum": ["a" * k for k in range(1, 1301)]})  # deeper than Python recursion goes
    assert engine.accepts(grammar, '"' + "a" * 1300 + '"') and engine.accepts(grammar, '"a"')
    assert not engine.accepts(grammar, '"' + "a" * 1301 + '"') and not engine.accepts(grammar, '""')


def test_constants_in_any_of_share_one_tree(engine):
    schema = {"anyOf": [{"const": f"v{i}", "description": f"value {i}"} for i in range(1000)] + [{"enum": [7, 8]}]}
    grammar = grammar_for(engine, schema)
    assert _widest_rule(grammar) <= 11, grammar
    for text in ('"v0"', '"v999"', "7", "8"):
        assert engine.accepts(grammar, text), text
    for text in ('"v1000"', '"v"', "9"):
        assert not engine.accepts(grammar, text), text


def test_a_pattern_of_many_words_shares_one_tree(engine):
    words = [f"item{i}" for i in range(500)]
    for pattern in ("^(" + "|".join(words) + ")$", "|".join(f"^{word}$" for word in words)):
        grammar = grammar_for(engine, {"type": "string", "pattern": pattern})
        assert _widest_rule(grammar) <= 11
        assert engine.accepts(grammar, '"item499"') and engine.accepts(grammar, '"item4"')
        assert not engine.accepts(grammar, '"item500"') and not engine.accepts(grammar, '"item"')


@pytest.mark.parametrize(("schema", "message"), [
    ({"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}} for i in range(65)]},
     "'anyOf' with 65 branches (at #) is not supported: at most 64 branches are"),
    ({"properties": {"x": {"oneOf": [{"type": "array", "maxItems": i} for i in range(100)]}}},
     "'oneOf' with 100 branches (at #/properties/x) is not supported: at most 64 branches are"),
    ({"type": "string", "pattern": "^(" + "|".join(f"{chr(97 + i % 26)}{i}+" for i in range(65)) + ")$"},
     "is not supported: it has an alternation of 65 choices; at most 64 are supported unless all are plain text"),
])
def test_more_alternatives_than_the_limit_are_refused_by_name(schema, message):
    with pytest.raises(SchemaError) as caught:
        check_schema(schema)
    assert message in str(caught.value)


def test_sixty_four_branches_are_taken(engine):
    grammar_for(engine, {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}}
                                   for i in range(64)]})

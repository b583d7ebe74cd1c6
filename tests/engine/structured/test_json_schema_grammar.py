"""The JSON Schema to GBNF converter, checked against llama.cpp's own grammar engine.

Every grammar is handed to llama.cpp's parser (llama_sampler_init_grammar: in llama-cpp-python
0.3.36 LlamaGrammar.from_string only keeps the text), and texts run through its grammar
sampler token by token: a text is accepted when every token is allowed and so is the end.
Every text a grammar accepts is also validated with jsonschema, so no test can pass on a
grammar that lets an invalid value through.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re

import jsonschema
import llama_cpp
import pytest

from engine.starter import starter_model_path
from engine.structured.gbnf import seq
from engine.structured.json_schema_grammar import (
    JSON_OBJECT_SCHEMA,
    GrammarBuilder,
    SchemaError,
    any_object_grammar,
    check_schema,
    schema_grammar,
)
from tests.engine.structured.schema_corpus import CORPUS


class GrammarEngine:
    """llama.cpp's grammar parser and sampler, on the starter model's vocabulary (no weights)."""

    def __init__(self) -> None:
        self.llm = llama_cpp.Llama(str(starter_model_path()), vocab_only=True, verbose=False)
        self.vocab = self.llm._model.vocab
        self.end = llama_cpp.llama_vocab_eos(self.vocab)

    def _sampler(self, grammar: str):
        return llama_cpp.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")

    def parses(self, grammar: str) -> bool:
        sampler = self._sampler(grammar)
        if sampler:
            llama_cpp.llama_sampler_free(sampler)
        return bool(sampler)

    def _allowed(self, sampler, token: int) -> bool:
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
        candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return data[0].logit != float("-inf")

    def accepts(self, grammar: str, text: str) -> bool:
        sampler = self._sampler(grammar)
        assert sampler, f"llama.cpp refuses the grammar:\n{grammar}"
        try:
            for token in self.llm.tokenize(text.encode(), add_bos=False, special=False):
                if not self._allowed(sampler, token):  # accepting a refused token would abort
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self.end)
        finally:
            llama_cpp.llama_sampler_free(sampler)


@pytest.fixture(scope="module")
def engine() -> GrammarEngine:
    return GrammarEngine()


def grammar_for(engine: GrammarEngine, schema: object) -> str:
    grammar = schema_grammar(schema)
    assert engine.parses(grammar), grammar
    return grammar


def check(engine: GrammarEngine, schema: object, good: list[str], bad: list[str]) -> None:
    grammar = grammar_for(engine, schema)
    for text in good:
        assert engine.accepts(grammar, text), f"{text!r} refused by\n{grammar}"
        jsonschema.validate(json.loads(text), schema)
    for text in bad:
        assert not engine.accepts(grammar, text), f"{text!r} accepted by\n{grammar}"


def refused(schema: object) -> str:
    with pytest.raises(SchemaError) as caught:
        schema_grammar(schema)
    with pytest.raises(SchemaError):
        check_schema(schema)
    return str(caught.value)


# --- the builder -------------------------------------------------------------------------------

def test_literal_escapes_quotes_backslashes_and_unprintable_characters(engine):
    text = 'say "hi" \\ back\n\ttab \x01\x7f é 😀 \u2028 # [x] {y}'
    builder = GrammarBuilder()
    lit = builder.literal(text)
    assert all(ch.isprintable() for ch in lit)
    grammar = builder.build(lit)
    assert engine.parses(grammar)
    assert engine.accepts(grammar, text)
    assert not engine.accepts(grammar, text + "x")
    assert not engine.accepts(grammar, text.replace("\\", ""))


def test_builder_wraps_a_schema_in_literal_text_and_rules_of_its_own(engine):
    builder = GrammarBuilder()
    args = builder.add_schema({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                              name="tool-args")
    name = builder.add_rule("tool-name", builder.literal('"get_weather"'))
    grammar = builder.build(seq(builder.literal("<tool_call>\n"), name, builder.literal(" "), args,
                                builder.literal("\n</tool_call>")))
    assert grammar.startswith("root ::= ")
    assert engine.parses(grammar)
    assert engine.accepts(grammar, '<tool_call>\n"get_weather" {"city": "Paris"}\n</tool_call>')
    assert not engine.accepts(grammar, '<tool_call>\n"get_weather" {"city": "Paris"}')
    assert not engine.accepts(grammar, '<tool_call>\n"get_weather" {"town": "Paris"}\n</tool_call>')


def test_rule_names_are_valid_unique_and_deterministic(engine):
    def build() -> str:
        builder = GrammarBuilder()
        first = builder.add_schema({"type": "string", "maxLength": 3}, name="Arg 1!")
        second = builder.add_schema({"type": "integer"}, name="Arg 1!")
        taken = builder.add_rule(first, '"x"')
        assert len({first, second, taken}) == 3
        return builder.build(f"{first} | {second} | {taken}")

    grammar = build()
    names = [line.split(" ::= ")[0] for line in grammar.splitlines()]
    assert all(re.fullmatch(r"[a-zA-Z0-9-]+", name) for name in names)
    assert len(names) == len(set(names))
    assert grammar == build()
    assert engine.accepts(grammar, '"ab"') and engine.accepts(grammar, "12") and engine.accepts(grammar, "x")


def test_a_refused_schema_leaves_the_builder_as_it_was(engine):
    builder = GrammarBuilder()
    with pytest.raises(SchemaError, match="'not' "):
        builder.add_schema({"properties": {"a": {"type": "string"}, "b": {"not": {}}}})
    grammar = builder.build(builder.add_schema({"type": "integer"}))
    assert "json-string" not in grammar
    assert engine.accepts(grammar, "42")


def test_build_refuses_undefined_and_left_recursive_rules():
    builder = GrammarBuilder()
    with pytest.raises(SchemaError, match="never defined: missing"):
        builder.build("missing")
    loop = builder.add_rule("loop", 'loop "x" | "y"')
    with pytest.raises(SchemaError, match="refers back to itself"):
        builder.build(loop)
    with pytest.raises(ValueError, match="one line"):
        builder.add_rule("two-lines", '"a"\n"b"')


# --- values --------------------------------------------------------------------------------------

def test_any_value_any_object_and_whitespace(engine):
    assert JSON_OBJECT_SCHEMA == {"type": "object"}
    check(engine, {}, ['{"a": [1, 2.5e3, -0.5, "x\\u00e9", true, false, null, {}]}', "[]", '"s"', "-12", "null"],
          ["", "nul", "[1,]", "{'a': 1}", "01", "1.", ".5", "NaN", '"\x01"'])
    anything = any_object_grammar()
    assert engine.parses(anything)
    for good in ['{"a": {"b": [1, null]}}', "{}", '\n\n{"x": "y"}', '{\n  "k": 1\n}']:
        assert engine.accepts(anything, good)
    for bad in ["[1]", '"text"', "{} trailing", '{"a": 1}\n\nmore', "{" + " " * 30 + "}", "{\n" + " " * 21 + "}"]:
        assert not engine.accepts(anything, bad)


@pytest.mark.parametrize(("schema", "good", "bad"), [
    ({"type": "string"}, ['""', '"a b"', '"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\u00e9😀"'], ['"\n"', '"\\x"', '"\\ud83d\\ude00"', "1"]),
    ({"type": "integer"}, ["0", "-7", "1234567890123456"], ["1.0", "-0", "007", "1e3", "12345678901234567"]),
    ({"type": "number"}, ["0", "-0.5", "3.25", "1e10", "2E-3"], ["+1", "1.", "1e", "1e100", "0x10"]),
    ({"type": "boolean"}, ["true", "false"], ["True", "1"]),
    ({"type": "null"}, ["null"], ["None", '""']),
    ({"type": ["string", "null"], "maxLength": 2}, ['"ab"', "null"], ['"abc"', "0"]),
    ({"enum": ["red", 2, None, {"a": [1]}]}, ['"red"', "2", "null", '{"a":[1]}'], ['"blue"', "3", '{"a":[2]}']),
    ({"type": "string", "enum": ["a", 1]}, ['"a"'], ["1"]),
    ({"const": "yes"}, ['"yes"'], ['"no"']),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"é😀"', '"\\n\\t"', '"abc"'], ['"a"', '"abcd"']),
    ({"type": "string", "minLength": 3}, ['"abc"', '"abcdef"'], ['"ab"']),
    ({"type": "string", "maxLength": 5000}, ['"' + "x" * 5000 + '"'], ['"' + "x" * 5001 + '"']),
    ({"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"}, ['"ABC-12"'], ['"AB-12"', '"ABC-123"', '"abc-12"']),
    ({"type": "string", "pattern": "\\d"}, ['"a1b"', '"9"'], ['"abc"']),
    ({"type": "string", "pattern": "^(ab|cd)+$|^x$"}, ['"abcd"', '"x"'], ['"abx"', '""']),
    # A negated class with \\s stays within ASCII, where Python's Unicode \\s and ours agree: no "é".
    ({"type": "string", "pattern": '^[^a-c\\s]"\\.\\\\$'}, ['"d\\".\\\\"'], ['"a\\".\\\\"', '" \\".\\\\"', '"é\\".\\\\"']),
    ({"type": "string", "pattern": "^(?:a|b)?c{2,}d{,2}e{2}\\w*\\D$"}, ['"acceeZ!"', '"ccddee_."'], ['"cee1"', '"acddee1"']),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4}, ['"ab"', '"abcd"'], ['"a"', '"abcde"']),
    ({"type": "string", "format": "date"}, ['"2024-02-28"', '"1999-12-31"', '"2023-04-30"'],
     ['"2024-02-30"', '"2023-04-31"', '"2023-13-01"', '"0000-01-01"', '"2023-1-01"']),
    ({"type": "string", "format": "time"}, ['"23:59:59Z"', '"08:30:00.123+02:00"'], ['"24:00:00Z"', '"08:30:00"']),
    ({"type": "string", "format": "date-time"}, ['"2024-01-31T12:00:00-05:00"'], ['"2024-01-31 12:00:00Z"']),
    ({"type": "string", "format": "uuid"}, ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123e4567e89b12d3a456426614174000"']),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}, ["[1]", "[1, 2, 3]", "[ 1,2 ]"],
     ["[]", "[1, 2, 3, 4]", '["a"]']),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
     ["[]", "[1]", '[1, "a"]'], ['[1, "a", 2]', '["a"]']),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}, "minItems": 2},
     ["[1, true]", "[1, true, false]"], ["[1]", "[1, 2]"]),
    ({"type": "array", "uniqueItems": False, "items": {"type": "null"}}, ["[null, null]"], ["[1]"]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "null"}],
      "additionalItems": False}, ["[null]", "[]"], ["[null, null]"]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2500}, ["[" + ", ".join(["1"] * 2500) + "]"],
     ["[" + ", ".join(["1"] * 2499) + "]"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]},
     ['{"b": "x"}', '{"a": 1, "b": "x"}', '{\n  "a": 1,\n  "b": "x"\n}'],
     ["{}", '{"a": 1}', '{"b": "x", "a": 1}', '{"b": "x", "c": 1}', '{"a": 1,, "b": "x"}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}, ["{}", '{"a": 1}', '{"b": 2}'],
     ['{"a": 1,}', '{, "b": 2}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True},
     ['{"a": 1, "z": [null]}', '{"z": 1}', '{"ab": 1}'], ['{"a": "x"}', '{"a": 1, "a": 2}']),
    ({"type": "object", "properties": {"ab": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     ['{"ab": 1, "a": "x"}', '{"abc": "y"}', '{"b": "z"}'], ['{"ab": "x"}', '{"a\\u0062": "x"}', '{"x": 1}']),
    ({"type": "object", "properties": {'say "hi"\n': {"type": "integer"}, "": {"type": "null"}}, "additionalProperties": True},
     ['{"say \\"hi\\"\\n": 1}', '{"": null, "say": 2}', '{"say \\"hi\\"": 3}'], ['{"say \\"hi\\"\\n": "x"}', '{"": 1}']),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "required": ["n"]}, ['{"n": 1, "m": 2}'],
     ["{}", '{"n": "x"}']),
    ({"type": "object"}, ['{"anything": [1, {"b": null}]}', "{}"], ["[]"]),
    ({"properties": {"a": {"type": "integer"}}, "required": ["a"]}, ['{"a": 1}'], ["1", '"a"']),
    ({"properties": {"a": {"type": "integer"}}, "required": ["b"]}, ['{"b": [true]}', '{"a": 1, "b": null}'], ['{"a": 1}']),
    ({"minimum": 3}, ["3", "4.5"], ["2", '"x"']),
    ({"type": "object", "properties": {"a": False, "b": {"type": "null"}}}, ['{"b": null}'], ['{"a": 1}']),
    ({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 5}]}, ['"a"', "5"], ['"ab"', "4"]),
    ({"oneOf": [{"const": 1}, {"const": "one"}]}, ["1", '"one"'], ["2"]),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}, ['{"a": "x"}', '{"b": "y"}', '{"a": "x", "b": "y"}'], ["{}"]),
    ({"allOf": [{"type": "integer"}]}, ["1"], ['"1"']),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]}, ['{"a": "x", "b": 1}'], ['{"a": "x"}']),
    ({"allOf": [{"properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                {"properties": {"a": {"maxLength": 1}}, "additionalProperties": False}]},
     ['{"a": "x"}', "{}"], ['{"a": "xy"}', '{"b": "x"}']),
    ({"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 3}]}, ['"ab"'], ['"a"', '"abcd"']),
    ({"$defs": {"id": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/id"}}, ["[1, 2]"], ["[0]"]),
    ({"definitions": {"s": {"type": "string"}}, "properties": {"x": {"$ref": "#/definitions/s", "description": "x"}}},
     ['{"x": "y"}'], ['{"x": 1}']),
    ({"properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a", "maxLength": 1}}}, ['{"a": "xx", "b": "y"}'],
     ['{"b": "yy"}']),
    ({"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}}, "required": ["name"]},
     ['{"name": "a", "child": {"name": "b", "child": {"name": "c"}}}'], ['{"name": "a", "child": {}}']),
])
def test_supported_keywords_accept_exactly_their_values(engine, schema, good, bad):
    check(engine, schema, good, bad)
    check_schema(schema)


def _integer_bounds():
    for low, high in [(0, 9), (10, 99), (-120, 37), (-50, -7), (5, 5), (None, -3), (17, None), (None, 200), (-9, None)]:
        yield {k: v for k, v in (("minimum", low), ("maximum", high)) if v is not None}
    yield {"exclusiveMinimum": -10, "exclusiveMaximum": 10}
    yield {"minimum": 0.5, "exclusiveMaximum": 7.5}


@pytest.mark.parametrize("bounds", list(_integer_bounds()))
def test_integer_ranges_are_exact(engine, bounds):
    grammar = grammar_for(engine, {"type": "integer", **bounds})
    validator = jsonschema.Draft202012Validator({"type": "integer", **bounds})
    for n in range(-1100, 1101):
        assert engine.accepts(grammar, str(n)) == validator.is_valid(n), n


NUMBER_BOUNDS = [
    {"minimum": 0, "maximum": 1}, {"exclusiveMinimum": 0, "exclusiveMaximum": 1}, {"minimum": -2, "exclusiveMaximum": 3},
    {"exclusiveMinimum": -5, "maximum": -1}, {"minimum": 0}, {"exclusiveMinimum": 0}, {"maximum": 0}, {"exclusiveMaximum": 0},
    {"minimum": 4, "maximum": 4}, {"minimum": 99, "exclusiveMaximum": 100}, {"minimum": 1.0, "maximum": 2.0},
]


@pytest.mark.parametrize("bounds", NUMBER_BOUNDS)
def test_number_ranges_with_whole_bounds_are_exact(engine, bounds):
    schema = {"type": "number", **bounds}
    grammar = grammar_for(engine, schema)
    validator = jsonschema.Draft202012Validator(schema)
    fractions = ["", ".0", ".5", ".000", ".25", ".9999999999999", ".0000000000001", ".99999999999999999", ".00000000000000001"]
    for whole in range(-7, 8):
        for fraction in fractions:
            for text in {f"{whole}{fraction}", f"-{abs(whole)}{fraction}"}:
                accepted = engine.accepts(grammar, text)
                if accepted:  # sound: never a value outside the bounds, rounding included
                    assert validator.is_valid(json.loads(text)), text
                elif len(fraction) <= 4 and not text.startswith("-0"):  # complete for plain values
                    assert not validator.is_valid(json.loads(text)), text
    assert not engine.accepts(grammar, "99.99999999999999999")


# --- what is refused -------------------------------------------------------------------------

@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}},
     "'uniqueItems' (at #/properties/tags) is not supported in structured output"),
    ({"not": {"type": "null"}}, "'not' (at #)"),
    ({"properties": {"a": {"if": {}, "then": {}}}}, "'if' (at #/properties/a)"),
    ({"type": "number", "multipleOf": 2}, "'multipleOf' (at #)"),
    ({"type": "array", "items": {"contains": {"type": "string"}}}, "'contains' (at #/items)"),
    ({"patternProperties": {"^x": {}}}, "'patternProperties' (at #)"),
    ({"propertyNames": {"maxLength": 3}}, "'propertyNames' (at #)"),
    ({"dependentRequired": {"a": ["b"]}}, "'dependentRequired' (at #)"),
    ({"dependentSchemas": {"a": {}}}, "'dependentSchemas' (at #)"),
    ({"anyOf": [{"minProperties": 1}]}, "'minProperties' (at #/anyOf/0)"),
    ({"maxProperties": 1}, "'maxProperties' (at #)"),
    ({"unevaluatedProperties": False}, "'unevaluatedProperties' (at #)"),
    ({"type": "string", "nullable": True}, "'nullable' (at #)"),
    ({"$defs": {"a": {"x-custom": 1}}, "$ref": "#/$defs/a"}, "'x-custom' (at #/$defs/a)"),
    ({"$ref": "https://example.com/schema.json"}, "'$ref' https://example.com/schema.json (at #) is not supported"),
    ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "'$ref' #/$defs/missing (at #/properties/a) points nowhere"),
    ({"properties": {"x": {"type": "number", "minimum": 0.5}}},
     "'minimum' 0.5 on a number (at #/properties/x) is not supported: only whole-number bounds are"),
    ({"type": "number", "minimum": 1e20}, "'minimum' 1e+20 on a number (at #)"),
    ({"type": "string", "format": "email"}, "'format' 'email' (at #) is not supported"),
    ({"type": "integer", "format": "int32"}, "'format' 'int32' (at #)"),
    ({"type": "string", "format": "date", "pattern": "^2"}, "'pattern' together with 'format' 'date' (at #)"),
    ({"type": "string", "pattern": "^a+b+$", "maxLength": 4}, "'pattern' '^a+b+$' with 'minLength'/'maxLength' (at #)"),
    ({"enum": ["a"], "maxLength": 3}, "'enum' together with 'maxLength' (at #)"),
    ({"allOf": [{"type": "string"}, {"anyOf": [{}]}, {"anyOf": [{"type": "string"}]}]}, "'anyOf' (at #) differs"),
    ({"allOf": [{"items": {}}, {"prefixItems": [{}]}]}, "'items' and 'prefixItems' (at #)"),
    ({"anyOf": [{}], "oneOf": [{}]}, "'oneOf' together with 'anyOf' (at #)"),
    ({"properties": {"a": {"$id": "a.json"}}}, "'$id' below the root (at #/properties/a)"),
    ({"type": "string", "maxLength": 10001}, "'maxLength' 10001 (at #) is over the limit of 10,000"),
    ({"type": "string", "pattern": "^a{10001}$"}, "a repetition count over 10,000"),
    ({"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]},
     "the schema recurses without end at #/properties/child: no finite JSON value matches it"),
    ({"$ref": "#"}, "the schema recurses without end at #: no finite JSON value matches it"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
     "the schema recurses without end at #/$defs/"),
    ({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1}}, "$ref": "#/$defs/n"},
     "the schema recurses without end at #/$defs/n/items"),
    ({"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "refers back to itself at #/anyOf/0"),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "'required' (at #) names 'a'"),
    ({"type": "object", "properties": {}, "required": ["a"], "additionalProperties": False}, "'additionalProperties' forbids"),
    ({"type": "integer", "minimum": 5, "maximum": 3}, "no JSON value matches the schema at #"),
    (False, "no JSON value matches the schema at #"),
])
def test_refused_schemas_name_the_keyword_and_where(schema, message):
    assert message in refused(schema)


@pytest.mark.parametrize(("pattern", "construct"), [
    ("a(?=b)", "a lookahead '(?='"), ("(?!a)b", "a lookahead '(?!'"), ("(?<=a)b", "a lookbehind '(?<='"),
    ("(?<!a)b", "a lookbehind '(?<!'"), ("(a)\\1", "the backreference"), ("(?P<x>a)", "a named group '(?P<'"),
    ("(?<x>a)", "a named group '(?<'"), ("(?i)a", "inline flags"), ("a*?", "a lazy quantifier '*?'"),
    ("a++", "a possessive quantifier"), ("\\bword", "the word boundary"), ("a^b", "a '^' after the start"),
    ("a$b", "a '$' before the end"), ("(a*)*", "a repetition of something that can match nothing"),
    ("\\p{L}", "the Unicode property"), ("(?>a)", "an atomic group"),
])
def test_refused_pattern_constructs_are_named(pattern, construct):
    message = refused({"type": "string", "pattern": pattern})
    assert message.startswith(f"'pattern' {pattern!r} (at #) is not supported: it has ")
    assert construct in message


@pytest.mark.parametrize(("schema", "where"), [
    ({"type": "strng"}, "#/type"), ({"minLength": -1}, "#/minLength"), ({"pattern": "("}, "#/pattern"),
    ({"properties": {"a": {"required": "a"}}}, "#/properties/a/required"),
])
def test_check_schema_refuses_what_is_not_json_schema(schema, where):
    with pytest.raises(SchemaError, match=f"not a valid JSON Schema at {where}"):
        check_schema(schema)


def test_limits_on_size_depth_and_grammar():
    deep: dict = {"type": "array"}
    for _ in range(70):
        deep = {"type": "array", "items": deep}
    assert "nests deeper than 64" in refused(deep)
    assert "limit is 1,000,000" in refused({"enum": ["x" * 1000] * 1100})
    # Values that share no prefix (an enum's values share their prefixes in one tree: literal_tree.py).
    assert "would be" in refused({"enum": [hashlib.sha512(str(i).encode()).hexdigest()[:90] for i in range(4000)]})
    assert "not JSON" in refused({"const": float("nan")})


def test_every_corpus_schema_passes_check_schema_and_parses_in_llama_cpp(engine):
    assert len(CORPUS) >= 24
    for case in CORPUS:
        check_schema(case.schema)
        grammar_for(engine, case.schema)

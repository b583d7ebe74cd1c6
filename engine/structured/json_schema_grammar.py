"""JSON Schema to llama.cpp GBNF: the grammar of structured output (response_format, tool calls).

The grammar accepts only valid instances of the schema, and refuses by name (SchemaError,
with the keyword and its JSON pointer) any keyword it cannot hold to. What it supports:
type (one or a list), enum, const, properties, required, additionalProperties, items,
prefixItems (and draft-7 array `items` with additionalItems), minItems/maxItems,
minLength/maxLength (in characters), pattern (regex_grammar), format date / time /
date-time / uuid, minimum/maximum/exclusiveMinimum/exclusiveMaximum (any bound on integers,
whole-number bounds on numbers; a bound past what the grammar writes anyway, 16 digits for
an integer, 10**15 for a number, asks nothing more, and a range wholly past it is refused),
anyOf, oneOf, allOf (one subschema, or schemas that merge: schema_merge), and $ref to #,
#/$defs/..., #/definitions/... or any local pointer, recursion included. Annotations
(title, description, default, examples, $schema, $comment, $id at the root, deprecated,
readOnly, writeOnly, $defs, definitions) are ignored, and so is uniqueItems false, which
asks nothing. Everything else (not, if/then/else, uniqueItems,
multipleOf, contains, patternProperties, propertyNames, dependentRequired, dependentSchemas,
min/maxProperties, unevaluated*, remote $ref, other formats, unknown keywords) is refused.
Counts (lengths, items, pattern repetitions) go up to 10,000; a schema up to 1 MB of JSON
and 64 levels deep, its grammar up to 300,000 characters. What llama.cpp pays per token grows
with the alternatives open at once, so enum values, and anyOf branches or pattern alternatives
that are all constants, share one tree of their texts (literal_tree), and otherwise an anyOf or
an alternation has at most 64 branches.

Choices that make the grammar narrower than the schema, never wider (a valid instance may
be refused; an accepted text is always valid), so that a small model stays on track:
- properties come in the schema's order; other keys, where allowed, after them;
- `properties` given and `additionalProperties` absent means no other keys (as llama.cpp
  does; JSON Schema would allow any). Without `properties`, other keys are allowed;
- without "type", a schema's types are those its keywords apply to ({"properties": ...}
  is an object, {"minimum": 0} a number); with no such keyword, any value;
- whitespace between tokens is at most one space, or a newline and up to 20 spaces or tabs;
  up to 20 spaces, tabs or newlines may come before the value; nothing after it;
- numbers have at most 16 integer digits (15 on a number with bounds), 16 fraction digits, and an
  exponent (of at most 2 digits) only without bounds; a \\u escape never names a surrogate;
- a date's February stops at the 28th; times need their offset (Z or +01:00);
- strings from `pattern` write each character one way (number_ranges, regex_grammar).
One choice makes it wider: oneOf is treated as anyOf, so a value matching two of its
branches is not refused (exclusivity is not enforced).
"""

from __future__ import annotations

import json

from engine.structured.errors import SchemaError, pointer
from engine.structured.gbnf import RuleSet, literal, seq
from engine.structured.gbnf_check import GrammarReport, analyze, reachable
from engine.structured.schema_rules import RefSite, SchemaCompiler

__all__ = ["JSON_OBJECT_SCHEMA", "GrammarBuilder", "SchemaError", "any_object_grammar", "check_schema",
           "schema_grammar"]

JSON_OBJECT_SCHEMA = {"type": "object"}  # response_format {"type": "json_object"}: any object

MAX_SCHEMA_BYTES = 1_000_000
MAX_DEPTH = 64
MAX_GRAMMAR_CHARS = 300_000
MAX_GRAMMAR_RULES = 100_000  # rules llama.cpp makes of the text, repetitions expanded
LEADING_SPACE = "[ \\t\\n]{0,20}"


class GrammarBuilder:
    """One GBNF text from several pieces: schemas, literal text and rules of the caller's own."""

    def __init__(self) -> None:
        self._rules = RuleSet()

    def literal(self, text: str) -> str:
        """A GBNF string literal matching exactly `text`."""
        return literal(text)

    def add_schema(self, schema: object, name: str = "value") -> str:
        """Adds the rules for one JSON value of `schema`; the name of the rule to refer to."""
        _check_shape(schema)
        state = self._rules.snapshot()
        try:
            compiler = SchemaCompiler(self._rules, schema, name)
            rule = compiler.compile()
            _check_rules(reachable(self._rules.rules, rule), compiler.sites)
        except SchemaError:
            self._rules.restore(state)  # the builder stays usable without this schema's rules
            raise
        return rule

    def add_rule(self, name: str, body: str) -> str:
        """Adds `name ::= body` under `name`, or a variant of it if taken; the name it got."""
        _one_line(body)
        actual = self._rules.reserve(name)
        self._rules.define(actual, body)
        return actual

    def build(self, root_body: str) -> str:
        """The whole grammar, `root ::= root_body` first."""
        _one_line(root_body)
        rules = {"root": root_body, **self._rules.rules}
        _check_rules(rules, [])
        return "".join(f"{name} ::= {body}\n" for name, body in rules.items())


def schema_grammar(schema: object) -> str:
    """The grammar of one JSON value of `schema`, optional whitespace before it, nothing after."""
    builder = GrammarBuilder()
    return builder.build(seq(LEADING_SPACE, builder.add_schema(schema)))


def any_object_grammar() -> str:
    """The grammar of any JSON object (OpenAI's response_format {"type": "json_object"})."""
    return schema_grammar(dict(JSON_OBJECT_SCHEMA))


def check_schema(schema: object) -> None:
    """Raises SchemaError for a schema schema_grammar would refuse, or one that is not valid JSON Schema."""
    _check_shape(schema)
    if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
        raise SchemaError("'$schema' (at #) must be a string: the URI of a JSON Schema draft")  # jsonschema crashes
    try:
        from jsonschema import exceptions, validators
    except ImportError:  # the grammar's own checks still run below
        pass
    else:
        try:
            # An unknown $schema URI is checked as the latest draft (jsonschema warns it will refuse it some day).
            validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
        except exceptions.SchemaError as error:
            message = error.message if len(error.message) <= 200 else error.message[:197] + "..."
            raise SchemaError(f"not a valid JSON Schema at {pointer(tuple(error.path))}: {message}") from None
    GrammarBuilder().add_schema(schema)


def _one_line(body: str) -> None:
    # llama.cpp ends a rule at a line break outside parentheses; literal() writes newlines as \n.
    if "\n" in body or "\r" in body:
        raise ValueError("a rule body must be one line: write line breaks in literals as \\n")


def _check_shape(schema: object) -> None:
    """JSON only, nested at most MAX_DEPTH deep, at most MAX_SCHEMA_BYTES long."""
    stack: list[tuple[object, tuple]] = [(schema, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict | list) and len(where) >= MAX_DEPTH:
            raise SchemaError(f"the schema nests deeper than {MAX_DEPTH} levels (at {pointer(where)})")
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise SchemaError(f"the schema has a key that is not a string (at {pointer(where)})")
                stack.append((value, (*where, key)))
        elif isinstance(node, list):
            stack.extend((value, (*where, i)) for i, value in enumerate(node))
    try:
        size = len(json.dumps(schema, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError) as error:
        raise SchemaError(f"the schema is not JSON: {error}") from None
    if size > MAX_SCHEMA_BYTES:
        raise SchemaError(f"the schema is {size:,} bytes of JSON; the limit is {MAX_SCHEMA_BYTES:,}")


def _site(sites: list[RefSite], rules: set[str]) -> str:
    """Where a loop among `rules` closes: the first $ref among them that leads back to where it is."""
    among = [site for site in sites if site.rule in rules and site.within in rules]
    edges: dict[str, set[str]] = {}
    for site in among:
        edges.setdefault(site.within, set()).add(site.rule)

    def leads_back(site: RefSite) -> bool:
        seen, todo = set(), [site.rule]
        while todo:
            rule = todo.pop()
            if rule == site.within:
                return True
            if rule not in seen:
                seen.add(rule)
                todo.extend(edges.get(rule, ()))
        return False

    pick = [site for site in among if leads_back(site)] or among or [s for s in sites if s.rule in rules]
    return pointer(pick[0].where) if pick else "#"


def _check_rules(rules: dict[str, str], sites: list[RefSite]) -> None:
    size = sum(len(name) + len(body) + 5 for name, body in rules.items())
    if size > MAX_GRAMMAR_CHARS:
        raise SchemaError(f"the grammar for this schema would be {size:,} characters; "
                          f"the limit is {MAX_GRAMMAR_CHARS:,}")
    report: GrammarReport = analyze(rules)
    if report.undefined:
        raise SchemaError(f"the grammar refers to rules never defined: {', '.join(report.undefined)}")
    if report.unproductive:
        raise SchemaError(f"the schema recurses without end at {_site(sites, report.unproductive)}: "
                          "no finite JSON value matches it")
    if report.left_recursive:
        raise SchemaError(f"the schema refers back to itself at {_site(sites, report.left_recursive)} "
                          "before any text of its own; structured output cannot make a grammar of that")
    if report.problems:
        raise SchemaError(f"the grammar would not work in llama.cpp: {report.problems[0]}")
    if report.generated_rules > MAX_GRAMMAR_RULES:
        raise SchemaError(f"the grammar for this schema would expand to {report.generated_rules:,} rules in "
                          f"llama.cpp; the limit is {MAX_GRAMMAR_RULES:,} (lower maxLength, maxItems or "
                          "repetition counts)")

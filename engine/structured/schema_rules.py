"""Turning one JSON schema into GBNF rules: keywords checked, references, combinators, enums.

A schema node becomes a GBNF expression; None stands for "no value matches" (the schema
`false`, an empty enum, bounds that exclude everything), which the caller either drops (an
anyOf branch, an optional property) or reports. The type keywords are in schema_types.

A `$ref` becomes a rule of its own, named before its body is made, so that a schema may
refer to itself; the rules are made from a work list rather than by recursion, so a long
chain of references cannot exhaust Python's stack. Whether recursion ever ends is checked
afterwards on the rules themselves (gbnf_check), where it is general.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from urllib.parse import unquote

from engine.structured.errors import SchemaError, Where, pointer, shown, unsupported
from engine.structured.gbnf import RuleSet, alt, name_hint
from engine.structured.json_primitives import json_dump, shared
from engine.structured.literal_tree import literal_choice
from engine.structured.schema_keywords import (
    ANNOTATIONS,
    FORMATS,
    SUPPORTED,
    constraints,
    has_type,
    json_equal,
    schema_list,
    schema_types,
)
from engine.structured.schema_merge import merge
from engine.structured.schema_types import typed

MAX_MERGE_DEPTH = 32  # merges inside merges: an allOf that refers back to itself
MAX_MERGES = 2000  # merges in all: anyOf branches that each merge their siblings in, nested
MAX_BRANCHES = 64  # branches of one anyOf/oneOf that are not all constants (~20 ms a token at most)


@dataclass(frozen=True)
class RefSite:
    """Where a `$ref` is, and the rule it became."""

    where: Where
    rule: str
    within: str  # the rule the $ref is in


@dataclass
class SchemaCompiler:
    rules: RuleSet
    root: object
    prefix: str
    sites: list[RefSite] = field(default_factory=list)
    _ref_rules: dict[Where, str] = field(default_factory=dict)
    _first_site: dict[Where, Where] = field(default_factory=dict)
    _pending: deque[tuple[Where, str]] = field(default_factory=deque)
    _merge_depth: int = 0
    _merges: int = 0
    _current: str = ""

    def compile(self) -> str:
        """The rules of the whole schema; the name of the rule of its root."""
        name = self.rules.reserve(self.prefix)
        self._ref_rules[()] = name
        self._first_site[()] = ()
        self._pending.append(((), name))
        while self._pending:
            path, rule = self._pending.popleft()
            self._current = rule
            expr = self.node(self._at(path), path)
            if expr is None:
                raise self._no_value(path)
            self.rules.define(rule, expr)
        return name

    def _no_value(self, path: Where) -> SchemaError:
        if not path:
            return SchemaError("no JSON value matches the schema at #")
        site = pointer(self._first_site[path])
        return SchemaError(f"'$ref' {pointer(path)} (at {site}) points to a schema that no JSON value matches")

    def hint(self, where: Where, suffix: str = "") -> str:
        """A rule-name hint for a place: the prefix and the last names on the way there."""
        names = []
        for i, part in enumerate(where):
            if part in ("properties", "$defs", "definitions") and i + 1 < len(where):
                continue
            names.append({"items": "item", "additionalProperties": "extra"}.get(str(part), str(part)))
        tail = "-".join(name_hint(name) for name in names[-2:])
        return "-".join(part for part in (self.prefix, tail, suffix) if part)

    # --- one node ---------------------------------------------------------------------------

    def node(self, schema: object, where: Where) -> str | None:
        """The GBNF expression for `schema` at `where`; None when no value matches it."""
        if schema is True:
            return shared(self.rules, "value")
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise SchemaError(f"the schema at {pointer(where)} must be an object or a boolean")
        self._check_keywords(schema, where)
        kept = constraints(schema)
        if "$ref" in kept:
            return self._ref(kept, where)
        if "allOf" in kept:
            return self._all_of(kept, where)
        if "anyOf" in kept or "oneOf" in kept:
            return self._any_of(kept, where)
        if "enum" in kept or "const" in kept:
            return self._enum(kept, where)
        return typed(self, kept, where)

    def _check_keywords(self, schema: dict, where: Where) -> None:
        for key, value in schema.items():
            if key not in SUPPORTED and key not in ANNOTATIONS and (key, value) != ("uniqueItems", False):
                raise unsupported(str(key), where)
        if "$id" in schema and where:
            raise unsupported("$id", where, "references are resolved against the root schema only", " below the root")
        # Checked whatever the type: {"type": "integer", "format": "int32"} asks for a range.
        if "format" in schema and schema["format"] not in FORMATS:
            raise unsupported("format", where, "only date, time, date-time and uuid are", f" {shown(schema['format'])}")

    def merged(self, parts: list, where: Where) -> str | None:
        """The node for a schema that must satisfy all `parts`."""
        self._merges += 1
        if self._merge_depth >= MAX_MERGE_DEPTH or self._merges > MAX_MERGES:
            raise SchemaError(f"the schemas to merge at {pointer(where)} refer back to themselves or are too "
                              "many; structured output cannot merge them")
        self._merge_depth += 1
        try:
            return self.node(merge(parts, where, lambda part: self._resolve_top(part, where)), where)
        finally:
            self._merge_depth -= 1

    # --- references ---------------------------------------------------------------------------

    def _ref(self, kept: dict, where: Where) -> str | None:
        siblings = {key: value for key, value in kept.items() if key != "$ref"}
        if siblings:
            return self.merged([{"$ref": kept["$ref"]}, siblings], where)
        path = self._ref_path(kept["$ref"], where)
        if path not in self._ref_rules:
            self._ref_rules[path] = self.rules.reserve(self.hint(path) if path else self.prefix)
            self._first_site[path] = where
            self._pending.append((path, self._ref_rules[path]))
        rule = self._ref_rules[path]
        self.sites.append(RefSite(where, rule, self._current))
        return rule

    def _ref_path(self, ref: object, where: Where) -> Where:
        """The place a local `$ref` points to; SchemaError for remote ones and dangling ones."""
        if not isinstance(ref, str):
            raise SchemaError(f"'$ref' (at {pointer(where)}) must be a string")
        if not (ref == "#" or ref.startswith("#/")):
            raise unsupported("$ref", where, "only references within the schema (#, #/$defs/...) are", f" {shown(ref, quoted=False)}")
        node, path = self.root, []
        for raw in ref[2:].split("/") if ref != "#" else []:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
                path.append(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                path.append(int(part))
            else:
                raise SchemaError(f"'$ref' {shown(ref, quoted=False)} (at {pointer(where)}) points nowhere")
        if not isinstance(node, dict | bool):
            raise SchemaError(f"'$ref' {shown(ref, quoted=False)} (at {pointer(where)}) does not point to a schema")
        return tuple(path)

    def _at(self, path: Where) -> object:
        node = self.root
        for part in path:
            node = node[part]
        return node

    def _resolve_top(self, part: object, where: Where) -> object:
        """`part` with a `$ref` at its top replaced by what it points to (siblings merged in)."""
        seen: set[Where] = set()
        while isinstance(part, dict) and "$ref" in part:
            self._check_keywords(part, where)
            path = self._ref_path(part["$ref"], where)
            if path in seen:
                raise SchemaError(f"the schema recurses without end at {pointer(where)}: "
                                  "no finite JSON value matches it")
            seen.add(path)
            siblings = {key: value for key, value in constraints(part).items() if key != "$ref"}
            target = self._at(path)
            part = merge([target, siblings], where, lambda p: self._resolve_top(p, where)) if siblings else target
        return part

    # --- combinators and enums --------------------------------------------------------------

    def _all_of(self, kept: dict, where: Where) -> str | None:
        parts = schema_list(kept, "allOf", where)
        siblings = {key: value for key, value in kept.items() if key != "allOf"}
        if len(parts) == 1 and not siblings:
            return self.node(parts[0], (*where, "allOf", 0))
        return self.merged([*parts, siblings], where)

    def _any_of(self, kept: dict, where: Where) -> str | None:
        if "anyOf" in kept and "oneOf" in kept:
            raise unsupported("oneOf", where, detail=" together with 'anyOf'")
        key = "anyOf" if "anyOf" in kept else "oneOf"
        siblings = {k: value for k, value in kept.items() if k != key}
        branches = schema_list(kept, key, where)
        literals = [] if siblings else [self._literals(b, (*where, key, i)) for i, b in enumerate(branches)]
        if literals and all(texts is not None for texts in literals):
            # Constants, each with its own description: one tree of values, as an enum is.
            texts = [text for found in literals for text in found or []]
            return literal_choice(self.rules, texts, self.hint(where, "enum")) if texts else None
        if len(branches) > MAX_BRANCHES:
            # llama.cpp follows every branch still open, for every token: ~0.35 ms a branch on 2 cores.
            raise unsupported(key, where, f"at most {MAX_BRANCHES} branches are (each costs llama.cpp time at "
                                          "every token), unless all are constants", f" with {len(branches):,} branches")
        options = []
        for i, branch in enumerate(branches):
            at = (*where, key, i)
            expr = self.merged([siblings, branch], at) if siblings else self.node(branch, at)
            if expr is not None:
                options.append(self.rules.symbol(self.hint(at), expr))
        return alt(options) if options else None

    def _literals(self, branch: object, where: Where) -> list[str] | None:
        """The JSON texts a branch of anyOf allows when it is only a const or an enum; else None."""
        if not isinstance(branch, dict):
            return None
        self._check_keywords(branch, where)
        kept = constraints(branch)
        if not ({"enum", "const"} & kept.keys()) or not kept.keys() <= {"enum", "const", "type"}:
            return None
        return self._enum_texts(kept, where)

    def _enum(self, kept: dict, where: Where) -> str | None:
        texts = self._enum_texts(kept, where)
        return literal_choice(self.rules, texts, self.hint(where, "enum")) if texts else None

    def _enum_texts(self, kept: dict, where: Where) -> list[str]:
        """The JSON texts of the values an enum or const allows (of its type, when it has one)."""
        keyword = "const" if "const" in kept else "enum"
        others = sorted(set(kept) - {"enum", "const", "type"})
        if others:
            raise unsupported(keyword, where, detail=f" together with '{others[0]}'")
        values = kept["enum"] if "enum" in kept else [kept["const"]]
        if not isinstance(values, list):
            raise SchemaError(f"'enum' (at {pointer(where)}) must be a list")
        if "const" in kept:
            values = [value for value in values if json_equal(value, kept["const"])]
        if "type" in kept:
            types = schema_types(kept, where)
            values = [value for value in values if any(has_type(value, name) for name in types)]
        return [json_dump(value) for value in values]

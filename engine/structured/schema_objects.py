"""Objects: declared properties in the schema's order, then other keys where allowed.

With properties p0..pn-1, each required or optional, the members are one of p_j first (for
each j up to the first required one), then tail(j+1), where tail(k) is p_k after a comma
(optional when p_k is) followed by tail(k+1); so a comma comes before every member but
the first, whichever are left out. tail(n) is the other keys, each after a comma.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.structured.errors import SchemaError, Where, pointer
from engine.structured.gbnf import RuleSet, alt, char_class, literal, seq
from engine.structured.json_primitives import JSON_SPECIAL, json_dump, json_text, shared
from engine.structured.regex_parse import complement

if TYPE_CHECKING:
    from engine.structured.schema_rules import SchemaCompiler

_MISSING = object()


@dataclass(frozen=True)
class Member:
    expr: str  # key, colon and value
    required: bool


def object_expr(c: SchemaCompiler, kept: dict, where: Where) -> str | None:
    properties = kept.get("properties", _MISSING)
    if properties is not _MISSING and not isinstance(properties, dict):
        raise SchemaError(f"'properties' (at {pointer(where)}) must be an object")
    required = kept.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise SchemaError(f"'required' (at {pointer(where)}) must be a list of strings")
    declared = {} if properties is _MISSING else properties
    required = list(dict.fromkeys(required))
    ws = shared(c.rules, "ws")
    other = _other_value(c, kept, where, declared_any=properties is not _MISSING)
    members = []
    for name, schema in declared.items():
        at = (*where, "properties", name)
        value = c.node(schema, at)
        if value is None:  # a property no value fits must be absent
            if name in required:
                raise SchemaError(f"'required' (at {pointer(where)}) names '{name}', "
                                  f"but no JSON value matches its schema at {pointer(at)}")
            continue
        members.append(Member(_member(c, name, value, ws, at), name in required))
    for name in required:
        if name not in declared:  # required without a schema of its own: the one for other keys
            value = other
            if value is None and "additionalProperties" in kept:
                raise SchemaError(f"'required' (at {pointer(where)}) names '{name}', "
                                  "which 'additionalProperties' forbids")
            if value is None:  # only our default forbids other keys; JSON Schema allows any value
                value = shared(c.rules, "value")
            members.append(Member(_member(c, name, value, ws, (*where, name)), True))
    other_member = None
    if other is not None:
        key = _other_key(c.rules, [*declared, *required], c.hint(where, "key"))
        other_member = c.rules.add(c.hint(where, "other"), seq(key, ws, '":"', ws, other))
    body = _members(c, members, other_member, ws, c.hint(where))
    if body is None:
        return c.rules.add(c.hint(where), seq('"{"', ws, '"}"'))
    text, optional = body
    if optional:
        text = c.rules.add(c.hint(where, "members"), seq(text, ws)) + "?"
        return c.rules.add(c.hint(where), seq('"{"', ws, text, '"}"'))
    return c.rules.add(c.hint(where), seq('"{"', ws, text, ws, '"}"'))


def _other_value(c: SchemaCompiler, kept: dict, where: Where, declared_any: bool) -> str | None:
    """The value of a key the schema does not declare; None where there may be none.

    JSON Schema allows any other key unless told otherwise. Here, as llama.cpp does, a
    schema that lists properties and says nothing of others allows none, so a small model
    does not wander off inventing keys.
    """
    extra = kept.get("additionalProperties", _MISSING)
    if extra is _MISSING:
        return None if declared_any else shared(c.rules, "value")
    value = c.node(extra, (*where, "additionalProperties"))
    return None if value is None else c.rules.symbol(c.hint(where, "extra"), value)


def _member(c: SchemaCompiler, name: str, value: str, ws: str, at: Where) -> str:
    key = literal(json_dump(name))
    return c.rules.add(c.hint(at, "kv"), seq(key, ws, '":"', ws, value))


def _members(c: SchemaCompiler, members: list[Member], other: str | None, ws: str,
             hint: str) -> tuple[str, bool] | None:
    """The members' grammar and whether it may be empty; None when there can be no member."""
    n = len(members)
    first_required = next((i for i, member in enumerate(members) if member.required), n)
    # tail(k) is referred to twice (by tail(k-1) and by "p_{k-1} first") up to first_required + 1.
    tail = ""
    if other is not None:
        tail = c.rules.add(f"{hint}-more", seq(ws, '","', ws, other)) + "*"
    tails = [""] * (n + 1)
    tails[n] = tail
    for k in range(n - 1, 0, -1):
        piece = seq(ws, '","', ws, members[k].expr)
        step = seq(piece, tails[k + 1]) if members[k].required else seq(f"( {piece} )?", tails[k + 1])
        tails[k] = c.rules.add(f"{hint}-tail", step) if step and k <= first_required + 1 else step
    options = [seq(members[j].expr, tails[j + 1]) for j in range(min(first_required + 1, n))]
    if first_required == n and other is not None:
        options.append(seq(other, tail))
    if not options:
        return None
    return alt(options), first_required == n


def _other_key(rules: RuleSet, names: list[str], hint: str) -> str:
    """A JSON string key that is none of `names`, as a rule.

    A trie of the names: at each node the key may end (unless a name ends there), go on with
    a child's character, or turn to any other plain character, after which anything may
    follow. Escapes are allowed only after that turn, so no spelling of a name gets through.
    """
    if not names:
        return shared(rules, "string")
    trie: dict = {}
    for name in dict.fromkeys(names):
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = {}  # a name ends here
    order, stack = [], [trie]
    while stack:  # parents before children; made in reverse, so children have names first
        node = stack.pop()
        order.append(node)
        stack.extend(child for key, child in node.items() if key is not None)
    made: dict[int, str] = {}
    tail = shared(rules, "key-tail")
    for node in reversed(order):
        children = [key for key in node if key is not None]
        options = [] if None in node else ['"\\""']
        options += [seq(literal(json_text(ord(ch))), made[id(node[ch])]) for ch in children]
        taken = [*JSON_SPECIAL, *((ord(ch), ord(ch)) for ch in children)]
        options.append(seq(char_class(complement(taken)), tail))
        made[id(node)] = rules.add(f"{hint}-trie", " | ".join(options))
    return rules.add(hint, seq('"\\""', made[id(trie)]))

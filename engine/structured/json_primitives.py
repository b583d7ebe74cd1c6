"""The shared rules of JSON text: whitespace, strings, numbers, any value, and the string formats.

Each primitive is made once per grammar, on first use, under a name the RuleSet picks (a
caller's own rule may already be called `ws`). Bodies name their dependencies as {key}.

Why the bounds: a small model at temperature 0 can loop on whitespace or digits forever,
so whitespace between tokens is at most one space or one newline and 20 spaces or tabs of
indentation, an integer has at most 16 digits, a fraction at most 16, an exponent at most 2
(1e99; a bigger one would parse as infinity). Every value the grammar allows is still valid
JSON of its type; some valid JSON (longer numbers, deeper indentation) is not produced.
"""

from __future__ import annotations

import json

from engine.structured.gbnf import RuleSet

_HEX = "[0-9a-fA-F]"

# key -> (rule-name hint, body)
_PRIMITIVES: dict[str, tuple[str, str]] = {
    "ws": ("ws", '| " " | "\\n" [ \\t]{0,20}'),
    # \u escapes never name a surrogate: a pair would be two escapes for one character,
    # which would break counting minLength in characters (and a lone one is not text).
    "hex4": ("json-hex4", f"[0-9a-cA-C] {_HEX}{{3}} | [dD] [0-7] {_HEX}{{2}} | [e-fE-F] {_HEX}{{3}}"),
    "char": ("json-char", '[^\\x22\\x5C\\x00-\\x1F] | "\\\\" ( [\\x22\\x5C/bfnrt] | "u" {hex4} )'),
    "string": ("json-string", '"\\"" {char}* "\\""'),
    "key-tail": ("json-key-tail", '{char}* "\\""'),
    "integer": ("json-integer", '"0" | "-"? [1-9] [0-9]{0,15}'),
    "number": ("json-number",
               '"-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [+\\x2D]? [0-9]{1,2} )?'),
    "boolean": ("json-boolean", '"true" | "false"'),
    "value": ("json-value", '{object} | {array} | {string} | {number} | "true" | "false" | "null"'),
    "member": ("json-member", '{string} {ws} ":" {ws} {value}'),
    "object": ("json-object", '"{" {ws} ( {member} ( {ws} "," {ws} {member} )* {ws} )? "}"'),
    "array": ("json-array", '"[" {ws} ( {value} ( {ws} "," {ws} {value} )* {ws} )? "]"'),
    # Formats (RFC 3339 as jsonschema checks them). February stops at the 28th so that no
    # date depends on a leap year; the offset is required, as RFC 3339 full-time has it.
    "day28": ("day-28", '"0" [1-9] | "1" [0-9] | "2" [0-8]'),
    "year": ("year", '[1-9] [0-9]{3} | "0" ( [1-9] [0-9]{2} | "0" ( [1-9] [0-9] | "0" [1-9] ) )'),
    "date-body": ("date-body", '{year} "-" ( "02-" {day28} | ( "0" [469] | "11" ) "-" ( {day28} | "29" | "30" )'
                  ' | ( "0" [13578] | "1" [02] ) "-" ( {day28} | "29" | "30" | "31" ) )'),
    "hour": ("hour", '[01] [0-9] | "2" [0-3]'),
    "time-body": ("time-body", '{hour} ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )?'
                  ' ( "Z" | [+\\x2D] {hour} ":" [0-5] [0-9] )'),
    "format-date": ("date", '"\\"" {date-body} "\\""'),
    "format-time": ("time", '"\\"" {time-body} "\\""'),
    "format-date-time": ("date-time", '"\\"" {date-body} "T" {time-body} "\\""'),
    "format-uuid": ("uuid", f'"\\"" {_HEX}{{8}} "-" {_HEX}{{4}} "-" {_HEX}{{4}} "-" {_HEX}{{4}} "-" {_HEX}{{12}} "\\""'),
}

# The lengths (in characters, quotes left out) of the strings each format allows.
FORMAT_LENGTHS: dict[str, tuple[int, int]] = {
    "date": (10, 10),
    "time": (9, 21),  # 12:00:00Z .. 12:00:00.123456+01:00
    "date-time": (20, 32),
    "uuid": (36, 36),
}


# Characters JSON writes as escapes (controls, '"', '\\'), and surrogates, which are not text.
JSON_SPECIAL = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0xD800, 0xDFFF))
_JSON_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


def json_text(code: int) -> str:
    """How a JSON string writes one character, the one way these grammars allow."""
    if code in _JSON_ESCAPES:
        return _JSON_ESCAPES[code]
    return f"\\u{code:04x}" if code < 0x20 else chr(code)


def json_dump(value: object) -> str:
    """Compact JSON text of a value, as the grammar will have the model write it.

    Characters stay as they are, except lone surrogates (a Python string may hold one):
    UTF-8 cannot carry them, so no token could ever write them; they become \\u escapes.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        text = json.dumps(value, separators=(",", ":"))
    return text


def shared(rules: RuleSet, key: str) -> str:
    """The name of primitive `key` in `rules`, defining it (and what it uses) on first use."""
    if key in rules.shared:
        return rules.shared[key]
    hint, body = _PRIMITIVES[key]
    name = rules.reserve(hint)
    rules.shared[key] = name  # before the body: json-value and json-array refer to each other
    deps = {dep: shared(rules, dep) for dep in _dependencies(body)}
    rules.define(name, _fill(body, deps))
    return name


def _dependencies(body: str) -> list[str]:
    found = []
    for piece in body.split("{")[1:]:
        key = piece.split("}", 1)[0]
        if key in _PRIMITIVES:
            found.append(key)
    return found


def _fill(body: str, names: dict[str, str]) -> str:
    for key, name in names.items():
        body = body.replace("{" + key + "}", name)
    return body

"""GBNF text: literals, character classes, named rules and bounded repetition.

llama.cpp's grammar parser (src/llama-grammar.cpp) has limits this module keeps to:
a repetition count over 2000 is refused when it is a minimum and silently dropped when it
is a maximum (`x{0,3000}` would become `x*`), and a repeated group may not expand into
more than 2000 rules. So every repetition here repeats a single symbol (a group is made
a rule of its own first), and counts over 2000 are built from chunks of 1000.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

LLAMA_MAX_REPETITION = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD
REPEAT_CHUNK = 1000
MAX_REPEAT = 10_000  # the most any count in a schema or a pattern may ask for

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
# Characters a character class may hold as they are; everything else is written as a hex escape.
_CLASS_PLAIN = re.compile(r"[a-zA-Z0-9 !#$%&'()*+,./:;<=>?@_`{|}~]")
_SINGLE_SYMBOL = re.compile(r'[a-zA-Z0-9-]+|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')
_NOT_NAME = re.compile(r"[^a-zA-Z0-9]+")


def _hex_escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02X}"
    if code < 0x10000:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def literal(text: str) -> str:
    """A GBNF string literal matching exactly `text`."""
    out = []
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(_hex_escape(ord(ch)))
    return '"' + "".join(out) + '"'


def _class_char(code: int) -> str:
    ch = chr(code)
    return ch if code < 0x80 and _CLASS_PLAIN.fullmatch(ch) else _hex_escape(code)


def char_class(ranges: Iterable[tuple[int, int]], negated: bool = False) -> str:
    """A GBNF character class of inclusive code-point ranges, e.g. [(0x30, 0x39)] -> [0-9]."""
    items = []
    for lo, hi in ranges:
        items.append(_class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}")
    return "[" + ("^" if negated else "") + "".join(items) + "]"


def is_single_symbol(expr: str) -> bool:
    """Whether `expr` is one rule name, one literal or one character class (safe to repeat)."""
    return _SINGLE_SYMBOL.fullmatch(expr) is not None


def seq(*parts: str) -> str:
    """A sequence of expressions, leaving out empty ones."""
    return " ".join(part for part in parts if part)


def alt(options: Iterable[str]) -> str:
    """An alternation of expressions, in parentheses when there is more than one."""
    unique = list(dict.fromkeys(options))
    if len(unique) == 1:
        return unique[0]
    return "( " + " | ".join(unique) + " )"


def name_hint(text: str) -> str:
    """A rule-name fragment from free text: lowercase letters, digits and single hyphens."""
    cleaned = _NOT_NAME.sub("-", text).strip("-").lower()[:32].strip("-")
    return cleaned or "x"


class RuleSet:
    """Named rules in the order they were made; names unique and derived from hints, so deterministic."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self.shared: dict[str, str] = {}  # primitive key -> rule name (json_primitives)
        self._taken: set[str] = {"root"}
        self._by_body: dict[str, str] = {}

    def reserve(self, hint: str) -> str:
        """A fresh rule name for `hint`; the rule is defined later with `define`."""
        base = "-".join(name_hint(part) for part in hint.split("-") if part) or "x"
        name, n = base, 2
        while name in self._taken:
            name, n = f"{base}-{n}", n + 1
        self._taken.add(name)
        return name

    def define(self, name: str, body: str) -> None:
        self.rules[name] = body

    def add(self, hint: str, body: str) -> str:
        """A rule with this body, reusing an existing rule whose body is the same text."""
        if body in self._by_body:
            return self._by_body[body]
        name = self.reserve(hint)
        self.define(name, body)
        self._by_body[body] = name
        return name

    def symbol(self, hint: str, expr: str) -> str:
        """`expr` itself when it is a single symbol, else the name of a rule holding it."""
        return expr if is_single_symbol(expr) else self.add(hint, expr)

    def snapshot(self) -> tuple:
        """The state to `restore` if what comes next fails half way."""
        return dict(self.rules), dict(self.shared), set(self._taken), dict(self._by_body)

    def restore(self, state: tuple) -> None:
        rules, shared, taken, by_body = state
        self.rules, self.shared, self._taken, self._by_body = dict(rules), dict(shared), set(taken), dict(by_body)


def _quantified(sym: str, lo: int, hi: int | None) -> str:
    if hi == 0:
        return ""
    if (lo, hi) == (1, 1):
        return sym
    suffix = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
    if suffix is None:
        suffix = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
    return sym + suffix


def repeat(rules: RuleSet, expr: str, lo: int, hi: int | None, hint: str) -> str:
    """`expr` repeated lo..hi times (hi None: no limit), as llama.cpp will parse it faithfully."""
    if lo < 0 or (hi is not None and hi < lo) or max(lo, hi or 0) > MAX_REPEAT:
        raise ValueError(f"bad repetition {lo}..{hi}")
    if hi == 0:
        return ""
    sym = rules.symbol(hint, expr)
    if lo <= LLAMA_MAX_REPETITION and (hi is None or hi <= LLAMA_MAX_REPETITION):
        return _quantified(sym, lo, hi)
    chunk = rules.add(f"{hint}-{REPEAT_CHUNK}", f"{sym}{{{REPEAT_CHUNK}}}")
    whole, rest = divmod(lo, REPEAT_CHUNK)
    required = seq(_quantified(chunk, whole, whole), _quantified(sym, rest, rest))
    if hi is None:
        return seq(required, f"{sym}*")
    return seq(required, _up_to(rules, sym, chunk, hi - lo, hint))


def _up_to(rules: RuleSet, sym: str, chunk: str, count: int, hint: str) -> str:
    """0..count copies of `sym`: a chunk then 0..count-1000 more, or fewer than a chunk."""
    if count <= LLAMA_MAX_REPETITION:
        return _quantified(sym, 0, count)
    longer = _up_to(rules, sym, chunk, count - REPEAT_CHUNK, hint)
    shorter = _quantified(sym, 0, REPEAT_CHUNK - 1)
    return rules.add(f"{hint}-upto-{count}", f"{chunk} {longer} | {shorter}")

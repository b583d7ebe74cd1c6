"""JSON Schema `pattern`: a subset of regular expressions turned into GBNF over JSON string text.

Supported: literal characters, escapes (\\d \\w \\s and their negations, \\. \\n \\t \\xHH \\uHHHH ...),
character classes with ranges and negation, `.`, groups `(...)` and `(?:...)`, alternation,
the quantifiers * + ? {n} {n,} {,m} {n,m}, and the anchors ^ and $ at the ends of the
pattern (or of its top-level alternatives). Anything else (lookarounds, backreferences,
lazy or possessive quantifiers, named groups, inline flags, \\b ...) is refused by name.

A pattern matches anywhere in the string unless anchored, as JSON Schema says: an
unanchored end is padded with any characters.

What it matches is kept inside what both Python's `re` (which jsonschema uses) and
ECMA-262 accept: \\d is [0-9], \\w [A-Za-z0-9_], \\s the ASCII spaces; a negated class or
shorthand that involves \\d \\w \\s stays within ASCII (Python's \\D would refuse an Arabic
digit that [^0-9] lets through). The grammar works on the JSON text, so each character is
written the one way JSON needs (`"` as \\", a newline as \\n); control characters come only
from classes that name them, or as \\t \\n \\r.
"""

from __future__ import annotations

from engine.structured.gbnf import RuleSet, alt, char_class, literal, repeat, seq
from engine.structured.json_primitives import JSON_SPECIAL, json_text, shared
from engine.structured.literal_tree import literal_choice
from engine.structured.regex_parse import (
    Branch,
    Chars,
    Choice,
    Concat,
    LengthError,
    PatternError,
    Times,
    complement,
    lengths,
    parse,
)

__all__ = ["LengthError", "PatternError", "pattern_grammar"]

MAX_CHOICES = 64  # alternatives of one alternation, unless all are plain text (~20 ms a token at most)


# --- lengths: minLength/maxLength narrowed into the pattern ------------------------------------

_FIT_HELP = ("it can be combined with 'minLength'/'maxLength' only when anchored at both ends "
             "with one open repetition of a single character, like ^[a-z]+$ or ^[A-Z]\\d{2,}$")


def _fit(branch: Branch, min_len: int, max_len: int | None) -> Branch | None:
    """`branch` held to min_len..max_len characters; None when none of its matches fits."""
    lo, hi = lengths(branch.body)
    if not (branch.start and branch.end):
        hi = None
    if lo >= min_len and (max_len is None or (hi is not None and hi <= max_len)):
        return branch
    if (max_len is not None and lo > max_len) or (hi is not None and hi < min_len):
        return None
    items = list(branch.body.items)
    open_items = [i for i, item in enumerate(items) if lengths(item)[0] != lengths(item)[1]]
    if not (branch.start and branch.end) or len(open_items) != 1:
        raise LengthError(_FIT_HELP)
    index = open_items[0]
    target = items[index]
    if not isinstance(target, Times) or lengths(target.item) != (1, 1):
        raise LengthError(_FIT_HELP)
    fixed = sum(lengths(item)[0] for i, item in enumerate(items) if i != index)
    new_lo = max(target.lo, min_len - fixed)
    new_hi = target.hi if max_len is None else max_len - fixed if target.hi is None else min(target.hi, max_len - fixed)
    if new_hi is not None and new_lo > new_hi:
        return None
    items[index] = Times(target.item, new_lo, new_hi)
    return Branch(Concat(tuple(items)), branch.start, branch.end)


# --- emission: the AST as GBNF over JSON string text --------------------------------------------

def _chars_expr(chars: Chars) -> str | None:
    plain = complement(JSON_SPECIAL, chars.ranges)
    options = [char_class(plain)] if plain else []
    for lo, hi in chars.ranges:
        for code in [*range(lo, min(hi, 0x1F) + 1), *(c for c in (0x22, 0x5C) if lo <= c <= hi)]:
            if not (chars.broad and code < 0x20 and code not in (0x09, 0x0A, 0x0D)):
                options.append(literal(json_text(code)))
    return alt(options) if options else None


def _plain(node) -> str | None:
    """The JSON text of a node that matches one fixed string (single characters in a row)."""
    items = node.items if isinstance(node, Concat) else (node,)
    texts = [_single_text(item) for item in items]
    return "".join(texts) if all(text is not None for text in texts) else None  # type: ignore[arg-type]


def _check_choices(count: int) -> None:
    # llama.cpp follows every alternative still open, for every token: ~0.35 ms each on 2 cores.
    if count > MAX_CHOICES:
        raise PatternError(f"an alternation of {count:,} choices; at most {MAX_CHOICES} are supported unless all "
                           "are plain text (each costs time at every token)")


def _single_text(node) -> str | None:
    """The text of a node that is one character (not a surrogate: no UTF-8 text holds one)."""
    if isinstance(node, Chars) and len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
        code = node.ranges[0][0]
        return None if 0xD800 <= code <= 0xDFFF else json_text(code)
    return None


class _Emitter:
    def __init__(self, rules: RuleSet, hint: str) -> None:
        self.rules, self.hint = rules, hint

    def emit(self, node) -> str | None:
        """GBNF for `node`; "" for the empty string; None when nothing matches."""
        if isinstance(node, Chars):
            return _chars_expr(node)
        if isinstance(node, Concat):
            return self.concat(node.items)
        if isinstance(node, Choice):
            texts = [_plain(option) for option in node.options]
            if all(text is not None for text in texts):  # (Mon|Tue|...): one tree of texts (literal_tree.py)
                return literal_choice(self.rules, texts, f"{self.hint}-alt")  # type: ignore[arg-type]
            _check_choices(len(node.options))
            options = [self.emit(option) for option in node.options]
            present = [option or '""' for option in options if option is not None]
            return alt(present) if present else None
        inner = self.emit(node.item)
        if inner is None:
            return "" if node.lo == 0 else None
        return repeat(self.rules, inner, node.lo, node.hi, self.hint) if inner else ""

    def concat(self, items) -> str | None:
        parts: list[str] = []
        text = ""
        for item in items:
            single = _single_text(item)
            if single is not None:
                text += single
                continue
            part = self.emit(item)
            if part is None:
                return None
            parts += [literal(text)] if text else []
            parts.append(part)
            text = ""
        parts += [literal(text)] if text else []
        return seq(*parts)


def pattern_grammar(pattern: str, rules: RuleSet, min_len: int = 0, max_len: int | None = None,
                    hint: str = "pattern") -> str | None:
    """GBNF for the inside of a JSON string (quotes left out) that `pattern` matches and that has
    min_len..max_len characters; None when no string can. Raises PatternError (LengthError)."""
    branches: list[Branch] = []
    for branch in parse(pattern):
        fitted = _fit(branch, min_len, max_len) if (min_len or max_len is not None) else branch
        if fitted is not None:
            branches.append(fitted)
    texts = [_plain(branch.body) if branch.start and branch.end else None for branch in branches]
    if len(texts) > 1 and all(text is not None for text in texts):  # ^Mon$|^Tue$|...
        return literal_choice(rules, texts, f"{hint}-alt")  # type: ignore[arg-type]
    _check_choices(len(branches))
    emitter = _Emitter(rules, hint)
    options = []
    for branch in branches:
        body = emitter.emit(branch.body)
        if body is None:
            continue
        pad = "" if branch.start and branch.end else f"{shared(rules, 'char')}*"
        options.append(seq("" if branch.start else pad, body, "" if branch.end else pad) or '""')
    return alt(options) if options else None

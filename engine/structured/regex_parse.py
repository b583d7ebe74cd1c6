"""The parser of `pattern` regular expressions into a small AST (see regex_grammar for the subset)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.structured.gbnf import MAX_REPEAT

UNICODE_MAX = 0x10FFFF
MAX_GROUP_DEPTH = 32
ASCII = ((0, 0x7F),)
DIGITS = ((0x30, 0x39),)
WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACES = ((0x09, 0x0D), (0x20, 0x20))  # what both Python and ECMA call whitespace in ASCII
ALL_SPACES = ((0x09, 0x0D), (0x1C, 0x20))  # what Python's \s also matches
_NAMED_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}
_REFUSED_ESCAPES = {
    "b": "the word boundary '\\b'", "B": "the non-boundary '\\B'", "A": "the anchor '\\A'",
    "Z": "the anchor '\\Z'", "z": "the anchor '\\z'", "G": "the anchor '\\G'",
    "k": "the named backreference '\\k'", "p": "the Unicode property '\\p'",
    "P": "the Unicode property '\\P'", "N": "the named character '\\N'", "c": "the control escape '\\c'",
}
_GROUP_KINDS = (("?:", None), ("?=", "a lookahead"), ("?!", "a lookahead"), ("?<=", "a lookbehind"),
                ("?<!", "a lookbehind"), ("?P<", "a named group"), ("?<", "a named group"),
                ("?P=", "a named backreference"), ("?#", "a comment"), ("?>", "an atomic group"),
                ("?(", "a conditional"), ("?", "inline flags"))


class PatternError(ValueError):
    """A pattern, or a construct in it, that cannot become a grammar."""


class LengthError(PatternError):
    """A pattern whose matches cannot be held to minLength/maxLength."""


def _normalize(ranges) -> tuple[tuple[int, int], ...]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def complement(ranges, within=((0, UNICODE_MAX),)) -> tuple[tuple[int, int], ...]:
    out, ranges = [], _normalize(ranges)
    for lo, hi in within:
        start = lo
        for a, b in ranges:
            if b < start or a > hi:
                continue
            if a > start:
                out.append((start, a - 1))
            start = max(start, b + 1)
        if start <= hi:
            out.append((start, hi))
    return _normalize(out)


@dataclass(frozen=True)
class Chars:
    """One character from a set; `broad` sets (negations, `.`) give control characters only as \\t \\n \\r."""

    ranges: tuple[tuple[int, int], ...]
    broad: bool = False


@dataclass(frozen=True)
class Concat:
    items: tuple


@dataclass(frozen=True)
class Choice:
    options: tuple


@dataclass(frozen=True)
class Times:
    item: object
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Branch:
    """A top-level alternative and whether it is anchored at each end."""

    body: Concat
    start: bool
    end: bool


def lengths(node) -> tuple[int, int | None]:
    """The fewest and most characters `node` matches (None: no limit)."""
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Times):
        lo, hi = lengths(node.item)
        if hi == 0:
            return 0, 0
        return lo * node.lo, None if node.hi is None or hi is None else hi * node.hi
    parts = [lengths(item) for item in (node.items if isinstance(node, Concat) else node.options)]
    los, his = [lo for lo, _ in parts], [hi for _, hi in parts]
    if isinstance(node, Concat):
        return sum(los), None if None in his else sum(his)
    return min(los), None if None in his else max(his)


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text, self.pos, self.depth = pattern, 0, 0
        self.shorthands = ""  # the \\d \\w \\s (or their negations) in the class being read

    def fail(self, what: str, at: int | None = None) -> PatternError:
        return PatternError(f"{what} at position {self.pos if at is None else at}")

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else ""

    def branches(self) -> list[Branch]:
        found = [self.branch()]
        while self.peek() == "|":
            self.pos += 1
            found.append(self.branch())
        if self.pos < len(self.text):
            raise self.fail("an unbalanced ')'")
        return found

    def branch(self) -> Branch:
        start = self.peek() == "^"
        self.pos += start
        body, end = self.sequence(top=True)
        return Branch(body, start, end)

    def sequence(self, top: bool = False) -> tuple[Concat, bool]:
        items: list[object] = []
        while self.peek() not in ("", "|", ")"):
            if self.peek() == "$":
                if top and self.peek(1) in ("", "|"):
                    self.pos += 1
                    return Concat(tuple(items)), True
                raise self.fail("a '$' before the end")
            if self.peek() == "^":
                raise self.fail("a '^' after the start")
            items.append(self.quantified(self.atom()))
        return Concat(tuple(items)), False

    def alternatives(self) -> object:
        options = [self.sequence()[0]]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence()[0])
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def atom(self) -> object:
        ch, at = self.peek(), self.pos
        if ch in "*+?" or (ch == "{" and self.counts() is not None):
            raise self.fail(f"a quantifier '{ch}' with nothing to repeat")
        self.pos += 1
        if ch == "(":
            return self.group(at)
        if ch == "[":
            return self.char_class(at)
        if ch == ".":
            return Chars(complement([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]), broad=True)
        if ch == "\\":
            return self.escape(in_class=False)
        return Chars(((ord(ch), ord(ch)),))

    def group(self, at: int) -> object:
        if self.peek() == "?":
            rest = self.text[self.pos:]
            prefix, kind = next((prefix, kind) for prefix, kind in _GROUP_KINDS if rest.startswith(prefix))
            if kind is not None:
                raise self.fail(f"{kind} '({prefix}'", at)
            self.pos += 2
        self.depth += 1
        if self.depth > MAX_GROUP_DEPTH:
            raise self.fail(f"groups nested deeper than {MAX_GROUP_DEPTH}", at)
        inner = self.alternatives()
        if self.peek() != ")":
            raise self.fail("a '(' never closed", at)
        self.pos += 1
        self.depth -= 1
        return inner

    def counts(self) -> tuple[int, int | None, int] | None:
        """The {n}, {n,}, {,m} or {n,m} at the cursor: (lo, hi, length of the text), or None."""
        end = self.text.find("}", self.pos)
        if self.peek() != "{" or end < 0:
            return None
        inside = self.text[self.pos + 1:end]
        lo_text, comma, hi_text = inside.partition(",")
        if not (lo_text or hi_text) or not all(part.isascii() and part.isdigit() for part in (lo_text, hi_text) if part):
            return None
        if not comma:
            return int(lo_text), int(lo_text), end + 1 - self.pos
        return int(lo_text or 0), (int(hi_text) if hi_text else None), end + 1 - self.pos

    def quantified(self, item: object) -> object:
        ch, at = self.peek(), self.pos
        if ch in ("*", "+", "?"):
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
            self.pos += 1
        elif (counts := self.counts()) is not None:
            lo, hi, size = counts
            self.pos += size
        else:
            return item
        if self.peek() in ("?", "+"):
            kind = "a lazy" if self.peek() == "?" else "a possessive"
            raise self.fail(f"{kind} quantifier '{self.text[at:self.pos + 1]}'", at)
        if self.peek() in ("*", "{") and (self.peek() == "*" or self.counts() is not None):
            raise self.fail("a repeated repetition", at)
        if max(lo, hi or 0) > MAX_REPEAT:
            raise self.fail(f"a repetition count over {MAX_REPEAT:,}", at)
        if hi is not None and hi < lo:
            raise self.fail(f"a repetition {{{lo},{hi}}} whose minimum is over its maximum", at)
        if lengths(item)[0] == 0 and (hi is None or hi > 1):
            raise self.fail("a repetition of something that can match nothing", at)
        return Times(item, lo, hi)

    def escape(self, in_class: bool) -> Chars:
        ch, at = self.peek(), self.pos - 1
        self.pos += 1
        if not ch:
            raise self.fail("a '\\' at the end", at)
        shorthand = {"d": (DIGITS, DIGITS), "w": (WORD, WORD), "s": (SPACES, ALL_SPACES)}
        if ch.lower() in shorthand:
            small, large = shorthand[ch.lower()]
            return Chars(small) if ch.islower() else Chars(complement(large, ASCII), broad=True)
        if ch == "b" and in_class:
            return Chars(((0x08, 0x08),))
        if ch in _REFUSED_ESCAPES:
            raise self.fail(_REFUSED_ESCAPES[ch], at)
        if ch.isdigit():
            if ch != "0" or self.peek().isdigit():
                raise self.fail(f"the backreference or octal escape '\\{ch}'", at)
            return Chars(((0, 0),))
        if ch in _NAMED_ESCAPES:
            code = _NAMED_ESCAPES[ch]
            return Chars(((code, code),))
        if ch in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[ch]
            digits = self.text[self.pos:self.pos + size]
            if len(digits) != size or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"a bad escape '\\{ch}{digits}'", at)
            self.pos += size
            code = int(digits, 16)
            if code > UNICODE_MAX:
                raise self.fail(f"a bad escape '\\{ch}{digits}'", at)
            return Chars(((code, code),))
        if ch.isascii() and ch.isalpha():
            raise self.fail(f"the unknown escape '\\{ch}'", at)
        return Chars(((ord(ch), ord(ch)),))

    def char_class(self, at: int) -> Chars:
        negated = self.peek() == "^"
        self.pos += negated
        ranges: list[tuple[int, int]] = []
        self.shorthands = ""
        first = True
        while first or self.peek() != "]":
            if not self.peek():
                raise self.fail("a '[' never closed", at)
            item = self.class_item()
            first = False
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                item = self.class_range(item, self.class_item(), at)
            ranges.extend(item.ranges)
        self.pos += 1
        broad = any(letter.isupper() for letter in self.shorthands)
        if not negated:
            return Chars(_normalize(ranges), broad=broad)
        # Complementing: leave out all Python calls whitespace, and stay in ASCII if a shorthand
        # is involved, where Python's Unicode \\d \\w \\s and ours agree.
        if "s" in self.shorthands:
            ranges.extend(ALL_SPACES)
        within = ASCII if self.shorthands else ((0, UNICODE_MAX),)
        return Chars(complement(ranges, within), broad=True)

    def class_item(self) -> Chars:
        ch = self.peek()
        self.pos += 1
        if ch != "\\":
            return Chars(((ord(ch), ord(ch)),))
        if self.peek() in ("d", "w", "s", "D", "W", "S"):
            self.shorthands += self.peek()
        return self.escape(in_class=True)

    def class_range(self, first: Chars, last: Chars, at: int) -> Chars:
        (lo, lo_end), (hi, hi_end) = first.ranges[0], last.ranges[0]
        if len(first.ranges) + len(last.ranges) != 2 or lo != lo_end or hi != hi_end or hi < lo:
            raise self.fail("a bad character range", at)
        return Chars(((lo, hi),))


def parse(pattern: str) -> list[Branch]:
    """The top-level alternatives of `pattern`; PatternError names what is not supported."""
    return _Parser(pattern).branches()

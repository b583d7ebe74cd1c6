"""Checks on GBNF rules before llama.cpp sees them: what it would refuse, and what it would loop on.

The text is parsed the way llama.cpp's parser reads it (src/llama-grammar.cpp), counting the
rules it synthesizes, so its repetition limits can be checked here. Then three fixpoints:
which rules can match the empty string, which can match some finite text at all (a rule
that cannot is a schema that recurses without end), and which reach themselves before
consuming a character (left recursion: llama.cpp refuses some such grammars and recurses
forever on others). An unbounded repetition of something that can match nothing (`(a?)*`)
is also reported: llama.cpp would loop on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.structured.gbnf import LLAMA_MAX_REPETITION


@dataclass(frozen=True)
class Terminal:
    empty: bool  # the literal "" matches nothing but the empty string


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Group:
    alternatives: tuple[tuple[object, ...], ...]


@dataclass(frozen=True)
class Repeat:
    item: object
    lo: int
    hi: int | None


@dataclass
class GrammarReport:
    undefined: list[str] = field(default_factory=list)
    unproductive: set[str] = field(default_factory=set)
    left_recursive: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)  # llama.cpp limits, malformed text
    generated_rules: int = 0  # the rules llama.cpp will make of it, its own included

    @property
    def ok(self) -> bool:
        return not (self.undefined or self.unproductive or self.left_recursive or self.problems)


class _Parser:
    """Reads rule bodies as llama.cpp does, counting the symbols it creates along the way."""

    def __init__(self, report: GrammarReport) -> None:
        self.report = report
        self.symbols: set[str] = set()
        self.generated = 0

    def symbol(self, name: str) -> None:
        if name not in self.symbols:
            self.symbols.add(name)
            self.generated += 1

    def parse(self, rule: str, body: str) -> Group:
        self.rule, self.text, self.pos = rule, body, 0
        group = self.alternatives()
        if self.pos != len(self.text):
            self.problem(f"unexpected {self.text[self.pos:self.pos + 10]!r}")
        return group

    def problem(self, what: str) -> None:
        self.report.problems.append(f"rule {self.rule}: {what}")
        self.pos = len(self.text)

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def alternatives(self) -> Group:
        options = [self.sequence()]
        while self.pos < len(self.text) and self.text[self.pos] == "|":
            self.pos += 1
            options.append(self.sequence())
        return Group(tuple(options))

    def sequence(self) -> tuple[object, ...]:
        items: list[object] = []
        prev_rules = 1
        while True:
            self.skip_space()
            if self.pos >= len(self.text):
                break
            ch = self.text[self.pos]
            if ch in "*+?{":
                if not items:
                    self.problem("a repetition with nothing before it")
                    break
                lo, hi = self.quantifier()
                items[-1], prev_rules = self.repetition(items[-1], lo, hi, prev_rules)
                continue
            if ch == '"':
                items.append(Terminal(self.delimited('"') == 0))
            elif ch == "[":
                self.delimited("]")
                items.append(Terminal(False))
            elif ch == ".":
                self.pos += 1
                items.append(Terminal(False))
            elif ch == "(":
                before = self.generated
                self.generated += 1
                self.pos += 1
                items.append(self.alternatives())
                if self.text[self.pos:self.pos + 1] != ")":
                    self.problem("expecting ')'")
                    break
                self.pos += 1
                prev_rules = max(1, self.generated - before)
                continue
            elif ch.isascii() and (ch.isalnum() or ch == "-"):
                start = self.pos
                while self.pos < len(self.text) and (self.text[self.pos].isascii() and (
                        self.text[self.pos].isalnum() or self.text[self.pos] == "-")):
                    self.pos += 1
                name = self.text[start:self.pos]
                self.symbol(name)
                items.append(Ref(name))
            else:
                break
            prev_rules = 1
        return tuple(items)

    def delimited(self, close: str) -> int:
        """Skips a literal or a class (escapes included); the number of characters inside."""
        self.pos += 1
        count = 0
        while self.pos < len(self.text) and self.text[self.pos] != close:
            self.pos += 2 if self.text[self.pos] == "\\" else 1
            count += 1
        if self.pos >= len(self.text):
            self.problem(f"unterminated {close!r}")
        self.pos += 1
        return count

    def quantifier(self) -> tuple[int, int | None]:
        ch = self.text[self.pos]
        self.pos += 1
        if ch != "{":
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        end = self.text.find("}", self.pos)
        inside = self.text[self.pos:end].replace(" ", "") if end >= 0 else ""
        self.pos = end + 1 if end >= 0 else len(self.text)
        lo_text, comma, hi_text = inside.partition(",")
        if not lo_text.isdigit() or (hi_text and not hi_text.isdigit()):
            self.problem(f"bad repetition {{{inside}}}")
            return 0, None
        lo = int(lo_text)
        return lo, (int(hi_text) if hi_text else None) if comma else lo

    def repetition(self, item: object, lo: int, hi: int | None, prev_rules: int) -> tuple[object, int]:
        # llama.cpp refuses a minimum over its threshold and silently drops a maximum over it.
        if lo > LLAMA_MAX_REPETITION or (hi is not None and hi > LLAMA_MAX_REPETITION):
            self.problem(f"a repetition count over {LLAMA_MAX_REPETITION}")
        total = hi if hi else (lo or 1)
        if prev_rules * total > LLAMA_MAX_REPETITION:
            self.problem(f"a repeated group of {prev_rules} rules times {total}")
        self.generated += 1 if hi is None else hi - lo
        return Repeat(item, lo, hi), prev_rules * total


def _any_seq(alternatives, test) -> bool:
    return any(all(test(item) for item in option) for option in alternatives)


def _nullable(node, known: dict[str, bool]) -> bool:
    if isinstance(node, Terminal):
        return node.empty
    if isinstance(node, Ref):
        return known.get(node.name, False)
    if isinstance(node, Repeat):
        return node.lo == 0 or _nullable(node.item, known)
    return _any_seq(node.alternatives, lambda item: _nullable(item, known))


def _productive(node, known: dict[str, bool]) -> bool:
    if isinstance(node, Terminal):
        return True
    if isinstance(node, Ref):
        return known.get(node.name, False)
    if isinstance(node, Repeat):
        return node.lo == 0 or _productive(node.item, known)
    return _any_seq(node.alternatives, lambda item: _productive(item, known))


def _fixpoint(rules: dict[str, Group], test) -> dict[str, bool]:
    known = dict.fromkeys(rules, False)
    changed = True
    while changed:
        changed = False
        for name, group in rules.items():
            if not known[name] and test(group, known):
                known[name] = changed = True
    return known


def _leftmost(node, nullable: dict[str, bool], out: set[str]) -> None:
    """The rules `node` may start with, looking past those that can match the empty string."""
    if isinstance(node, Ref):
        out.add(node.name)
    elif isinstance(node, Repeat):
        if node.hi != 0:
            _leftmost(node.item, nullable, out)
    elif isinstance(node, Group):
        for option in node.alternatives:
            for item in option:
                _leftmost(item, nullable, out)
                if not _nullable(item, nullable):
                    break


def _empty_loops(node, nullable: dict[str, bool], out: list[str], rule: str) -> None:
    if isinstance(node, Repeat):
        if node.hi is None and _nullable(node.item, nullable):
            out.append(f"rule {rule}: an unbounded repetition of something that can match nothing")
        _empty_loops(node.item, nullable, out, rule)
    elif isinstance(node, Group):
        for option in node.alternatives:
            for item in option:
                _empty_loops(item, nullable, out, rule)


def _on_cycles(edges: dict[str, set[str]]) -> set[str]:
    """The rules that can reach themselves (Tarjan's strongly connected components, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: set[str] = set()
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    result.update(component)
    return result


def analyze(rules: dict[str, str]) -> GrammarReport:
    """Everything llama.cpp would refuse or loop on in these rules (name -> body, in text order)."""
    report = GrammarReport()
    parser = _Parser(report)
    parsed: dict[str, Group] = {}
    for name, body in rules.items():
        parser.symbol(name)
        parsed[name] = parser.parse(name, body)
    report.generated_rules = parser.generated
    report.undefined = sorted(parser.symbols - set(rules))
    nullable = _fixpoint(parsed, _nullable)
    productive = _fixpoint(parsed, _productive)
    report.unproductive = {name for name, ok in productive.items() if not ok}
    edges: dict[str, set[str]] = {}
    for name, group in parsed.items():
        edges[name] = set()
        _leftmost(group, nullable, edges[name])
        _empty_loops(group, nullable, report.problems, name)
    report.left_recursive = _on_cycles(edges)
    return report


def _refs(node, out: set[str]) -> None:
    if isinstance(node, Ref):
        out.add(node.name)
    elif isinstance(node, Repeat):
        _refs(node.item, out)
    elif isinstance(node, Group):
        for option in node.alternatives:
            for item in option:
                _refs(item, out)


def reachable(rules: dict[str, str], start: str) -> dict[str, str]:
    """The rules `start` uses, itself included, directly or not (in the order of `rules`)."""
    parser = _Parser(GrammarReport())
    seen, todo = {start}, [start]
    while todo:
        name = todo.pop()
        found: set[str] = set()
        _refs(parser.parse(name, rules[name]), found)
        for ref in found - seen:
            if ref in rules:
                seen.add(ref)
                todo.append(ref)
    return {name: body for name, body in rules.items() if name in seen}

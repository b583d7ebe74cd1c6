"""One of many literal texts (an enum's values) as a grammar that shares their prefixes.

llama.cpp keeps one parse stack per alternative still open and checks every token of the vocabulary
against each, so the cost of a token grows with the open alternatives: 2,000 enum values written side by
side cost ~0.8 s a token (10,000: ~6 s), where a plain integer costs ~5 ms. Written as a radix tree, the
only alternatives open are the characters that may come next: the same texts, exactly, at about the cost
of a character class. Identical subtrees become one rule (RuleSet.add), and the tree is walked without
recursion, as a chain of prefixes ("a", "aa", "aaa", ...) is as deep as it is long.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

from engine.structured.gbnf import RuleSet, alt, literal, seq


@dataclass
class _Node:
    """texts[lo:hi] (sorted), which share their first `offset` characters; reached after `prefix`."""

    lo: int
    hi: int
    offset: int
    prefix: str = ""
    options: list[str] | None = None
    pending: list[_Node] | None = None  # children not yet made options; None until grouped


def literal_choice(rules: RuleSet, texts: list[str], hint: str) -> str:
    """An expression that matches exactly one of `texts` (at least one)."""
    texts = sorted(set(texts))
    if texts == [""]:
        return '""'
    numbers = itertools.count(1)
    stack = [_Node(0, len(texts), 0)]
    while True:
        node = stack[-1]
        if node.pending is None:
            node.options, node.pending = [], _children(texts, node)
        if node.pending:
            child = node.pending.pop()
            if child.hi - child.lo == 1:  # one text: the rest of it, whole
                node.options.append(literal(child.prefix))
            else:
                stack.append(child)
            continue
        stack.pop()
        body = _body(texts, node)
        if not stack:
            return body
        rule = rules.add(f"{hint}-{next(numbers)}", body)
        stack[-1].options.append(seq(literal(node.prefix), rule))  # type: ignore[union-attr]


def _children(texts: list[str], node: _Node) -> list[_Node]:
    """The node's texts past its offset, grouped by their next character; last group first."""
    offset, groups = node.offset, []
    i = node.lo + 1 if len(texts[node.lo]) == offset else node.lo  # sorted: a text ending here comes first
    while i < node.hi:
        j = i + 1
        while j < node.hi and texts[j][offset] == texts[i][offset]:
            j += 1
        # Sorted, so what the group's first and last texts share, all of them share.
        shared = os.path.commonprefix([texts[i][offset:], texts[j - 1][offset:]])
        groups.append(_Node(i, j, offset + len(shared), shared))
        i = j
    return groups[::-1]


def _body(texts: list[str], node: _Node) -> str:
    body = alt(node.options or [])
    if len(texts[node.lo]) != node.offset:
        return body
    # One of the texts ends here: what the others add is optional.
    return f"( {body} )?" if len(node.options or []) == 1 else f"{body}?"

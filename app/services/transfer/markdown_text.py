"""Text put into Markdown as it is: code fences it cannot close, and code it leaves open closed.

The Markdown export (export.py) and the tool steps in it (export_steps.py) put text of any kind (a
reply cut off mid-code, a tool's output holding fences of its own) into a document whose structure
must survive it.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")


def fence_for(text: str, char: str = "`") -> str:
    """A code fence longer than any run of `char` in `text`, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(re.escape(char) + "+", text)), default=0)
    return char * max(3, longest + 1)


def close_fences(text: str) -> str:
    """`text` with a code block it leaves open (a reply cut off mid-code) closed, so what follows it
    in the export is not swallowed into the code."""
    fence = ""
    for line in text.splitlines():
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped == stripped[0] * len(stripped):
                fence = ""
            continue
        match = _FENCE.match(line)
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence = match.group(1)
    if not fence:
        return text
    return text + ("" if text.endswith("\n") else "\n") + fence


def code_span(text: str) -> str:
    """`text` as inline code on one line: its white space runs as one space, between backticks more than
    any run of them in it (CommonMark's rule), padded where it starts or ends with one."""
    text = " ".join(text.split())
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"

"""The names the model sees for MCP tools: OpenAI's rule (`^[A-Za-z0-9_-]{1,64}$`), unique in one request."""

from __future__ import annotations

import re

MAX_NAME = 64  # OpenAI's limit for a function name; the other APIs accept what fits it
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(name: str) -> str:
    """`name` with every character outside [A-Za-z0-9_-] made `_`, at most 64 characters (never empty)."""
    return _NOT_ALLOWED.sub("_", name)[:MAX_NAME] or "tool"


def model_names(tools: list[tuple[str, str]]) -> list[str]:
    """A name for each (server, tool): the tool's own name where no other server in `tools` has one of that
    name, else `server__tool`; sanitized, and made unique with a `_2`, `_3`... where sanitizing or cutting
    made two alike. Same order as `tools`."""
    counts: dict[str, int] = {}
    for _, tool in tools:
        counts[tool] = counts.get(tool, 0) + 1
    taken: set[str] = set()
    names = []
    for server, tool in tools:
        base = sanitize(tool if counts[tool] == 1 else f"{sanitize(server)}__{tool}")
        name, n = base, 1
        while name in taken:
            n += 1
            suffix = f"_{n}"
            name = base[: MAX_NAME - len(suffix)] + suffix
        taken.add(name)
        names.append(name)
    return names

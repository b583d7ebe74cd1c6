"""A request body as JSON, or the 400 that says why it is not usable.

JSON allows what Python cannot take further: nesting deep enough to exhaust the parser's
recursion, and `\\ud800`-style escapes that decode to lone surrogates, which no UTF-8
encoder (the tokenizer's, the response's) accepts. Both are refused here, naming the place,
so that no request reaches the engine with them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.server.errors import ApiError

# Far deeper than any chat request (content parts are 3 levels, tool schemas a dozen).
MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_request_json(raw: bytes) -> Any:
    """The parsed body; ApiError 400 if it is not JSON, too deep, or holds a lone surrogate."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:  # UnicodeDecodeError (not UTF-8) is one too
        raise ApiError(400, "The request body is not valid JSON.") from None
    _check(body)
    return body


def _check(body: Any) -> None:
    """Walk the document without recursion: depth, and every string (keys too) encodable as UTF-8."""
    stack: list[tuple[str, Any, int]] = [("", body, 1)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise _not_unicode(path or None)
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise _too_deep()
            if isinstance(value, dict):
                items = []
                for key, item in value.items():
                    if _SURROGATE.search(key):
                        raise _not_unicode(path or None, key=True)
                    items.append((f"{path}.{key}" if path else key, item, depth + 1))
            else:
                items = [(f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value)]
            stack.extend(reversed(items))  # the first problem in reading order is the one named


def _too_deep() -> ApiError:
    return ApiError(400, f"The request body is nested more than {MAX_DEPTH} levels deep.", code="invalid_json")


def _not_unicode(path: str | None, key: bool = False) -> ApiError:
    where = f"A key of '{path}'" if key and path else "A key" if key else f"'{path}'" if path else "The body"
    return ApiError(
        400, f"{where} holds a lone UTF-16 surrogate (such as \\ud800), which is not text.",
        param=path, code="invalid_value",
    )

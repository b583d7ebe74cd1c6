"""A request body as JSON, or the 400 that says why it is not usable.

JSON allows what Python cannot take further: nesting deep enough to exhaust the parser's
recursion, `\\ud800`-style escapes that decode to lone surrogates, which no UTF-8
encoder (the tokenizer's, the response's) accepts, and numbers such as 1e400 that no
double holds (Python reads them as infinity). All are refused here, naming the place,
so that no request reaches the engine with them. NaN and Infinity, which Python's parser
takes though JSON has no such words, are not JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from app.server.errors import ApiError

# Far deeper than any chat request (content parts are 3 levels, tool schemas a dozen).
MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_request_json(raw: bytes) -> Any:
    """The parsed body; ApiError 400 if it is not JSON, too deep, or holds a lone surrogate or an infinite number."""
    try:
        body = json.loads(raw, parse_constant=_not_json)
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
        elif isinstance(value, float) and not math.isfinite(value):
            where = f"'{path}'" if path else "The body"
            raise ApiError(400, f"{where} is a number too large for a double (over 1.8e308).", param=path or None,
                           code="invalid_value")
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


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def _too_deep() -> ApiError:
    return ApiError(400, f"The request body is nested more than {MAX_DEPTH} levels deep.", code="invalid_json")


def _not_unicode(path: str | None, key: bool = False) -> ApiError:
    where = f"A key of '{path}'" if key and path else "A key" if key else f"'{path}'" if path else "The body"
    return ApiError(
        400, f"{where} holds a lone UTF-16 surrogate (such as \\ud800), which is not text.",
        param=path, code="invalid_value",
    )

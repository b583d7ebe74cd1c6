"""Cutting a tool's result: at 1 MiB where it is kept (the reply's card, the history), at 64 KiB where the
model reads it, each with a note saying so. No MCP SDK here: the chat imports it on every reply."""

from __future__ import annotations

KEPT_RESULT_BYTES = 1 << 20  # what a call keeps of its result: a server cannot fill the history
MODEL_RESULT_BYTES = 64 << 10  # what the model reads of it: a result does not fill the context


def cut(text: str, limit: int = KEPT_RESULT_BYTES) -> str:
    """`text`, cut to `limit` bytes of UTF-8 with a note saying so when longer."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[cut: the result was {len(data):,} bytes; only the first {limit:,} are kept]"


def for_model(text: str, limit: int = MODEL_RESULT_BYTES) -> str:
    """What the model reads of a result: the first `limit` bytes and a note; the whole stays in the card."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[cut: the result is {len(data):,} bytes; the model is given the first {limit:,}]"

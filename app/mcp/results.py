"""A tool's result as the text the model gets: text parts joined, other parts named with their size, cut
at 1 MB."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

MAX_RESULT_BYTES = 1 << 20


def result_text(result: types.CallToolResult) -> str:
    """The content of a tool's result as one text (its structured content where it has no content)."""
    parts = [_part(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    return cut("\n".join(parts))


def cut(text: str, limit: int = MAX_RESULT_BYTES) -> str:
    """`text`, cut to `limit` bytes of UTF-8 with a note saying so when longer."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[cut: the result was {len(data):,} bytes; only the first {limit:,} are kept]"


def _part(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {_b64_size(block.data):,} bytes]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        size = len(resource.text.encode()) if hasattr(resource, "text") else _b64_size(resource.blob)
        return f"[resource {resource.uri}, {size:,} bytes]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _b64_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=")

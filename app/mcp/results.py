"""A tool's result as text: text parts joined, images described ("[image: 640x480 PNG]"), other parts named
with their size, cut at 1 MiB (result_cut.py; the model reads the first 64 KiB of it)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from app.mcp.image_size import b64_size, describe_image
from app.mcp.result_cut import cut


def result_text(result: types.CallToolResult) -> str:
    """The content of a tool's result as one text (its structured content where it has no content)."""
    parts = [_part(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    return cut("\n".join(parts))


def _part(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return describe_image(block.mime_type, block.data)
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mime_type}, {b64_size(block.data):,} bytes]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        size = len(resource.text.encode()) if hasattr(resource, "text") else b64_size(resource.blob)
        return f"[resource {resource.uri}, {size:,} bytes]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


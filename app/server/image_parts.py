"""OpenAI's `image_url` content parts: an image sent inline as a `data:` URL, checked and decoded here.

Only `data:` URLs are taken: fetching an `http(s)` URL would make the server a client of any address a
request names (another machine on the network, a slow or endless download). The base64 is checked for its
length before it is decoded, and the image goes through the same intake as the window's and the CLI's
(app/services/media): formats by their magic bytes, pixels by their header before anything decodes them,
so a decompression bomb costs nothing. Each refusal is a 400 naming the part.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from app.server.errors import bad_param
from app.services.media.errors import MediaRefused
from app.services.media.intake import image_from_bytes
from app.services.media.limits import MAX_FILE_BYTES, check_image_count
from engine.protocol import Media

# data:[<media type>][;<parameter>]*;base64,<data>
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[^;,]*)*);base64,", re.ASCII)
# The base64 of the largest image file taken (4 characters per 3 bytes), with room for line breaks.
_MAX_BASE64_CHARS = (MAX_FILE_BYTES + 2) // 3 * 4 + 1024


def image_part(part: dict, param: str) -> Media:
    """The image of one `{"type": "image_url", "image_url": {"url": ..., "detail": ...}}` part."""
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise bad_param(f"{param}.image_url", f"'{param}.image_url.url' must be a data: URL of an image.")
    detail = value.get("detail") if isinstance(value, dict) else None
    if detail not in (None, "auto", "low", "high"):
        raise bad_param(f"{param}.image_url.detail", "'detail' must be auto, low or high.")
    match = _DATA_URL.match(url)
    if match is None:
        if url.lower().startswith(("http://", "https://")):
            raise bad_param(f"{param}.image_url", "This server fetches no image URLs: send the image inline as a "
                                                  "data: URL (data:image/png;base64,...).")
        raise bad_param(f"{param}.image_url", "The image must be a base64 data: URL (data:image/png;base64,...).")
    encoded = url[match.end():]
    if len(encoded) > _MAX_BASE64_CHARS:
        raise bad_param(f"{param}.image_url", f"The image is over {MAX_FILE_BYTES // 1_000_000} MB.")
    try:
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise bad_param(f"{param}.image_url", "The image's base64 is malformed.") from None
    try:
        return image_from_bytes(data, name=f"The image of {param}").as_media()
    except MediaRefused as exc:
        raise bad_param(f"{param}.image_url", f"{exc}.") from None


def images_of(images: list[Media], param: str) -> tuple[Media, ...]:
    """A message's images, at most as many as one message may carry."""
    try:
        check_image_count(images)
    except MediaRefused as exc:
        raise bad_param(param, f"{exc}.") from None
    return tuple(images)


def has_image_parts(body: Any) -> bool:
    """Whether a chat request carries any image part (its decoding then runs off the event loop)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return False
    return any(isinstance(m, dict) and isinstance(m.get("content"), list)
               and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
               for m in messages)

"""Ollama's `images`: base64 strings (no data: URL needed), through the same intake as the OpenAI API's
image parts (app/server/image_parts.py): the length checked before decoding, formats by their magic
bytes, pixels by their header before anything decodes them. Each refusal is a 400 naming the image."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from app.server.errors import bad_param
from app.server.image_parts import images_of
from app.services.media.errors import MediaRefused
from app.services.media.intake import image_from_bytes
from app.services.media.limits import MAX_FILE_BYTES
from engine.protocol import Media

# The base64 of the largest image file taken (4 characters per 3 bytes), with room for line breaks.
_MAX_BASE64_CHARS = (MAX_FILE_BYTES + 2) // 3 * 4 + 1024
_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[^;,]*)*;base64,", re.ASCII)


def images_field(value: Any, param: str) -> tuple[Media, ...]:
    """A message's (or a generate request's) `images`, decoded and checked."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_param(param, f"'{param}' must be an array of base64-encoded images.")
    return images_of([_image(item, f"{param}[{i}]") for i, item in enumerate(value)], param)


def has_images(body: Any) -> bool:
    """Whether a request carries any image (decoding them then runs off the event loop)."""
    if not isinstance(body, dict):
        return False
    messages = body.get("messages")
    in_messages = isinstance(messages, list) and any(isinstance(m, dict) and m.get("images") for m in messages)
    return bool(body.get("images")) or in_messages


def _image(item: Any, param: str) -> Media:
    if not isinstance(item, str) or not item:
        raise bad_param(param, f"'{param}' must be a base64-encoded image.")
    match = _DATA_URL.match(item)
    encoded = item[match.end():] if match else item  # a data: URL is taken too
    if len(encoded) > _MAX_BASE64_CHARS:
        raise bad_param(param, f"The image is over {MAX_FILE_BYTES // 1_000_000} MB.")
    try:
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise bad_param(param, f"'{param}' is not valid base64 (send the image's bytes base64-encoded).") from None
    try:
        return image_from_bytes(data, name=f"The image of {param}").as_media()
    except MediaRefused as exc:
        raise bad_param(param, f"{exc}.") from None

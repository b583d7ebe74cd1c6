"""A message's images as OpenAI's chat API carries them: `image_url` content parts holding `data:` URLs.

The engine protocol carries an image as the pixels the intake decoded (RGB rows, upright, at most
MAX_SIDE on its longer side: app/services/media), not as its file, so a remote server gets them encoded
again: JPEG at quality 92, which every OpenAI-compatible server decodes (OpenAI's own API takes PNG,
JPEG, WebP and GIF) and which keeps a 2,048-pixel photo near 1 MB where PNG would take 5 to 10. The
images come before the text, as the local engine places them (engine/protocol.py, ChatMessage.media).
"""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image

from engine.protocol import Media

JPEG_QUALITY = 92


def image_part(media: Media) -> dict[str, Any]:
    """One image as an `image_url` content part with a base64 JPEG `data:` URL."""
    if media.kind != "image":
        raise ValueError(f"{media.kind} is not sent to remote servers")
    picture = Image.frombytes("RGB", (media.width, media.height), media.data)
    out = io.BytesIO()
    picture.save(out, "JPEG", quality=JPEG_QUALITY)
    url = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def content_parts(text: str, media: tuple[Media, ...]) -> list[dict[str, Any]]:
    """A user turn's content with its images: the image parts, then the text (left out when empty)."""
    parts = [image_part(m) for m in media if m.kind == "image"]
    if text:
        parts.append({"type": "text", "text": text})
    return parts

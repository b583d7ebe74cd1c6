"""OpenAI's `image_url` content parts: an image sent inline as a `data:` URL, checked and decoded here.

`data:` URLs are taken. An `http(s)` URL is fetched only when the server was started with
`--allow-image-urls` (ImageFetch), since it makes the server a client of any address a request names
(another machine on its network, a slow or endless download); then with the download module's stall
limit, deadline and the same byte cap as an inline image (models/download/small_fetch.py). The base64 is checked for its
length before it is decoded, and the image goes through the same intake as the window's and the CLI's
(app/services/media): formats by their magic bytes, pixels by their header before anything decodes them,
so a decompression bomb costs nothing. Each refusal is a 400 naming the part.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from app.server.errors import bad_param
from app.services.media.errors import MediaRefused
from app.services.media.intake import image_from_bytes
from app.services.media.limits import MAX_FILE_BYTES, check_image_count
from engine.protocol import Media
from models.download.request import DownloadError
from models.download.small_fetch import fetch_small

ImageFetch = Callable[[str], bytes]  # an http(s) URL's bytes, at most MAX_FILE_BYTES (or DownloadError)

# data:[<media type>][;<parameter>]*;base64,<data>
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[^;,]*)*);base64,", re.ASCII)
# The base64 of the largest image file taken (4 characters per 3 bytes), with room for line breaks.
_MAX_BASE64_CHARS = (MAX_FILE_BYTES + 2) // 3 * 4 + 1024


def image_part(part: dict, param: str, fetch: ImageFetch | None = None) -> Media:
    """The image of one `{"type": "image_url", "image_url": {"url": ..., "detail": ...}}` part; an http(s)
    URL is fetched with `fetch` where the server allows it, else refused."""
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise bad_param(f"{param}.image_url", f"'{param}.image_url.url' must be a data: URL of an image.")
    detail = value.get("detail") if isinstance(value, dict) else None
    if detail not in (None, "auto", "low", "high"):
        raise bad_param(f"{param}.image_url.detail", "'detail' must be auto, low or high.")
    match = _DATA_URL.match(url)
    if match is None and url.lower().startswith(("http://", "https://")) and fetch is not None:
        try:
            data = fetch(url)
        except DownloadError as exc:
            raise bad_param(f"{param}.image_url", f"The image could not be fetched: {exc.message}.") from None
        return _decoded(data, param)
    if match is None:
        if url.lower().startswith(("http://", "https://")):
            raise bad_param(f"{param}.image_url", "This server fetches no image URLs: send the image inline as a "
                                                  "data: URL (data:image/png;base64,...), or start it with "
                                                  "--allow-image-urls.")
        raise bad_param(f"{param}.image_url", "The image must be a base64 data: URL (data:image/png;base64,...).")
    encoded = url[match.end():]
    if len(encoded) > _MAX_BASE64_CHARS:
        raise bad_param(f"{param}.image_url", f"The image is over {MAX_FILE_BYTES // 1_000_000} MB.")
    try:
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise bad_param(f"{param}.image_url", "The image's base64 is malformed.") from None
    return _decoded(data, param)


def _decoded(data: bytes, param: str) -> Media:
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


def fetch_image(url: str) -> bytes:
    """ImageFetch under the download module's limits and the inline image's byte cap."""
    return fetch_small(url, MAX_FILE_BYTES)


def has_image_parts(body: Any, kinds: tuple[str, ...] = ("image_url",)) -> bool:
    """Whether a chat request carries any image part (any part of `kinds`; its decoding then runs off the event
    loop)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return False
    return any(isinstance(m, dict) and isinstance(m.get("content"), list)
               and any(isinstance(p, dict) and p.get("type") in kinds for p in m["content"])
               for m in messages)


def has_media_parts(body: Any) -> bool:
    """Whether a chat request carries any image, audio or file part (`input_audio`: a clip is decoded and
    resampled, seconds for a long one; `file`: a document is read and chunked): its reading then runs off the
    event loop."""
    return has_image_parts(body, ("image_url", "input_audio", "file"))

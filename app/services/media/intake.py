"""Taking an image in: a path (the CLI's --image, the window's attach, drop and paste) or bytes (the
server's `data:` URLs, a pasted image, the store) become a PreparedImage, or one line saying why not.

A path is looked at before it is opened: anything but a regular file (a FIFO, whose open would wait for a
writer; a device, which may never end; a folder) is refused by its stat, and the file is then opened
non-blocking and checked again on the open descriptor (models.formats.local_file), so a swap in between is
caught too. Its size is checked before it is read. The bytes' format is found by their magic bytes and
their size by the header, and an image with too many pixels is refused before anything decodes it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from app.services.media.decode import DECODE_VERSION, decode_pixels, too_many_pixels
from app.services.media.errors import ImageRefused
from app.services.media.limits import DEFAULT_LIMITS, ImageLimits
from app.services.media.sniff import SUFFIXES, read_header
from app.services.media.store import MediaStore
from engine.protocol import Media
from models.formats.errors import InvalidModelFile
from models.formats.local_file import kind_of, open_regular_file
from models.units import human_size


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """An image ready for a projector, with the file it came from.

    Attributes:
        name: the file's name (or the name given with the bytes), for messages and the transcript.
        sha256: hex digest of the original bytes: the store's key, and the image's identity in caches.
        format: PNG, JPEG, WEBP, GIF or BMP, as the magic bytes say.
        width, height: the size of `rgb`: upright, scaled down to the longest side allowed.
        full_width, full_height: the image's own size, upright (what a viewer shows at 100 %).
        rgb: width × height × 3 bytes, rows top to bottom, on white: what mtmd_bitmap_init takes.
        original: the file's bytes as they came (what the store keeps and an export writes).
    """

    name: str
    sha256: str
    format: str
    width: int
    height: int
    full_width: int
    full_height: int
    rgb: bytes = field(repr=False)
    original: bytes = field(repr=False)

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".png", ".jpg", ".webp", ".gif", ".bmp")."""
        return SUFFIXES[self.format]

    @property
    def scaled(self) -> bool:
        """Whether `rgb` is smaller than the image (its longest side was over the limit)."""
        return (self.width, self.height) != (self.full_width, self.full_height)

    @property
    def cache_key(self) -> str:
        """What identifies these pixels in a KV cache (an mtmd bitmap's id): the same file, decoded the
        same way to the same size, gives the same key."""
        return f"{self.sha256}:{self.width}x{self.height}:v{DECODE_VERSION}"

    def as_media(self) -> Media:
        """What the engine takes: the pixels, and an id (hex, as libmtmd's bitmap ids are) of `cache_key`."""
        return Media("image", hashlib.sha256(self.cache_key.encode()).hexdigest(), self.rgb, self.width, self.height)


def read_image(path: str | os.PathLike[str], *, name: str | None = None,
               limits: ImageLimits = DEFAULT_LIMITS) -> PreparedImage:
    """Read, check and decode the image file at `path`.

    Args:
        name: what messages call it; the file's name by default.

    Raises:
        ImageRefused: one line naming the file and the reason.
    """
    path = Path(path)
    name = name or path.name or str(path)
    return image_from_bytes(read_image_file(path, name=name, max_bytes=limits.max_bytes),
                            name=name, limits=limits)


def image_from_bytes(data: bytes, *, name: str = "image", limits: ImageLimits = DEFAULT_LIMITS) -> PreparedImage:
    """Check and decode an image given as bytes (`name` is what messages call it).

    Raises:
        ImageRefused: one line naming it and the reason.
    """
    if len(data) > limits.max_bytes:
        raise ImageRefused(name, _too_large(len(data), limits.max_bytes))
    header = read_header(data, name)
    if header.pixels > limits.max_pixels:
        raise ImageRefused(name, too_many_pixels(header.width, header.height, limits.max_pixels))
    pixels = decode_pixels(data, header, name, limits)
    return PreparedImage(
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        format=header.format,
        width=pixels.width,
        height=pixels.height,
        full_width=pixels.full_width,
        full_height=pixels.full_height,
        rgb=pixels.rgb,
        original=data,
    )


def stored_image(store: MediaStore, sha256: str, *, name: str | None = None,
                 limits: ImageLimits = DEFAULT_LIMITS) -> PreparedImage:
    """The image the store keeps under `sha256`, its hash verified, decoded again.

    Raises:
        MediaMissing, MediaDamaged: as MediaStore.read.
        ImageRefused: the stored bytes are no image this intake takes (stored by an older Tailor with
            other limits, say).
    """
    data = store.read(sha256)
    return image_from_bytes(data, name=name or f"image {sha256[:12]}", limits=limits)


def read_image_file(path: Path, *, name: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them; never blocks on a FIFO.

    Raises:
        ImageRefused: missing, unreadable, not a regular file (told by its stat, before any open), or
            larger than `max_bytes`.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ImageRefused(name, "does not exist") from None
    except OSError as exc:
        raise ImageRefused(name, f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ImageRefused(name, f"is {kind_of(info.st_mode)}, not an image file")
    if info.st_size > max_bytes:
        raise ImageRefused(name, _too_large(info.st_size, max_bytes))
    try:
        file = open_regular_file(path)  # non-blocking, checked again on the descriptor
    except InvalidModelFile as exc:
        raise ImageRefused(name, exc.problem) from None
    try:
        with file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise ImageRefused(name, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:  # it grew since its stat
        raise ImageRefused(name, _too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"is {human_size(size)}; Tailor takes image files of up to {human_size(max_bytes)}"

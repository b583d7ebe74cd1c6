"""The images of a history's chats as the engine takes them (engine_history.engine_messages' `images`).

Each turn sends the whole conversation again, its images too; decoding a photo takes a tenth of a second
or more, so each stored image is decoded once and kept, by its hash, in a small cache bounded in bytes
(the RGB an image becomes is at most 2048 × 2048 × 3, 12 MiB): the chat being continued has its images
there, and the least recently sent go first. The caller owns it (one per session, not a global), and
uses it from one thread.
"""

from __future__ import annotations

from app.chat.decoded_media import DecodedMedia
from app.services.history.records import ImageRef
from app.services.media.intake import stored_image
from app.services.media.limits import DEFAULT_LIMITS, ImageLimits
from app.services.media.store import MediaStore
from engine.protocol import Media

# What the cache holds at most, in bytes of RGB: a chat's worth of large images (twenty at the longest
# side allowed), many more of the usual screenshot or phone-photo size.
CACHE_BYTES = 256 << 20


class StoredImages:
    """Reads a message's stored images for the engine: verified against their hash, decoded, cached.

    Args:
        store: the media store of the history (ChatStore.media).
        max_bytes: the most RGB bytes kept decoded; one image larger than that is decoded, not kept.
        limits: the intake's limits (the longest side sent, the pixels and bytes taken).
    """

    def __init__(self, store: MediaStore, max_bytes: int = CACHE_BYTES, limits: ImageLimits = DEFAULT_LIMITS):
        self.store, self.max_bytes, self.limits = store, max_bytes, limits
        self._decoded = DecodedMedia(max_bytes)

    def __call__(self, ref: ImageRef) -> Media:
        """The image `ref` names, as the engine takes it.

        Raises:
            MediaMissing, MediaDamaged: its file is gone or no longer holds the bytes it was stored with.
            ImageRefused: the stored bytes are no image the intake takes now.
            ValueError: `ref.sha256` is no sha256 (a damaged row).
        """
        return self._decoded.get(ref.sha256, lambda: stored_image(self.store, ref.sha256, name=ref.name, limits=self.limits).as_media())

    def __len__(self) -> int:
        return len(self._decoded)

    @property
    def cached_bytes(self) -> int:
        return self._decoded.cached_bytes

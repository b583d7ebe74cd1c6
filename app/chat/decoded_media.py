"""A bounded cache of media decoded for the engine, least recently sent first out (StoredImages, StoredClips).

Each turn sends the whole conversation again, its images and clips too; decoding them again each time would
cost a tenth of a second or more per image. What is kept is bounded in bytes of decoded data, not in count:
one large photo or long clip weighs what it takes. The caller owns it and uses it from one thread.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

from engine.protocol import Media


class DecodedMedia:
    """Decoded media by key (a hash, with whatever else changes the decoding), at most `max_bytes` of it.

    Args:
        max_bytes: the most decoded bytes kept; one item larger than that is decoded each time, not kept.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._cache: OrderedDict[Hashable, Media] = OrderedDict()
        self._bytes = 0

    def get(self, key: Hashable, decode: Callable[[], Media]) -> Media:
        """The item kept under `key`, or `decode()`'s, kept where it fits."""
        media = self._cache.get(key)
        if media is not None:
            self._cache.move_to_end(key)
            return media
        media = decode()
        self._keep(key, media)
        return media

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def _keep(self, key: Hashable, media: Media) -> None:
        size = len(media.data)
        if size > self.max_bytes:
            return
        self._cache[key] = media
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, oldest = self._cache.popitem(last=False)
            self._bytes -= len(oldest.data)

"""The audio clips of a history's chats as the engine takes them (engine_history.engine_messages' `clips`).

Each turn sends the whole conversation again, its clips too, at the rate the loaded projector hears. A clip is
read from the media store (verified against its hash), decoded and resampled once for that rate and kept, by
its hash and the rate, in a small cache bounded in bytes (ten minutes at 16 kHz is 38 MB of float samples): the
chat being continued has its clips there, and the least recently sent go first. The caller owns it (one per
session, not a global), and uses it from one thread.
"""

from __future__ import annotations

from app.chat.decoded_media import DecodedMedia
from app.services.history.records import AudioRef
from app.services.media.intake import stored_audio
from app.services.media.limits import DEFAULT_AUDIO_LIMITS, AudioLimits
from app.services.media.store import MediaStore
from engine.protocol import Media

# What the cache holds at most, in bytes of samples: the four longest clips one message may carry at 16 kHz
# (4 × 38 MB), or many more of the usual spoken question's length.
CACHE_BYTES = 160 << 20


class StoredClips:
    """Reads a message's stored clips for the engine: verified against their hash, decoded, resampled, cached.

    Args:
        store: the media store of the history (ChatStore.media).
        sample_rate: the rate the loaded projector hears (ModelState.audio_sample_rate); set it again when
            another model loads (a clip decoded for another rate is not reused).
        max_bytes: the most sample bytes kept; one clip larger than that is decoded, not kept.
        limits: the intake's limits.
    """

    def __init__(self, store: MediaStore, sample_rate: int = 16_000, max_bytes: int = CACHE_BYTES,
                 limits: AudioLimits = DEFAULT_AUDIO_LIMITS):
        self.store, self.sample_rate, self.max_bytes, self.limits = store, sample_rate, max_bytes, limits
        self._decoded = DecodedMedia(max_bytes)

    def __call__(self, ref: AudioRef) -> Media:
        """The clip `ref` names, as the engine takes it, at `sample_rate`.

        Raises:
            MediaMissing, MediaDamaged: its file is gone or no longer holds the bytes it was stored with.
            AudioRefused: the stored bytes are no clip the intake takes now.
            ValueError: `ref.sha256` is no sha256 (a damaged row).
        """
        rate = self.sample_rate
        return self._decoded.get((ref.sha256, rate), lambda: stored_audio(
            self.store, ref.sha256, sample_rate=rate, name=ref.name, limits=self.limits).as_media())

    def __len__(self) -> int:
        return len(self._decoded)

    @property
    def cached_bytes(self) -> int:
        return self._decoded.cached_bytes

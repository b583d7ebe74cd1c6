"""What the media intake and store raise: each message is one line a user can act on."""

from __future__ import annotations

from app.services.named_refusal import NamedRefusal


class MediaRefused(ValueError):
    """Something a message was to carry cannot be sent; the message says what and why, in one line."""


class ImageRefused(NamedRefusal, MediaRefused):
    """One image is refused: `str()` is "<name> <problem>", e.g. "photo.svg is an SVG image: Tailor reads...".

    Attributes:
        name: the file's name (or the name the caller gave bytes).
        problem: the reason alone, starting with a verb ("is damaged or truncated (...)").
    """


class AudioRefused(NamedRefusal, MediaRefused):
    """One audio clip is refused: `str()` is "<name> <problem>", e.g. "talk.mp3 is an MP3 audio file: Tailor
    reads WAV; convert it first (ffmpeg -i talk.mp3 talk.wav)".

    Attributes:
        name: the file's name (or the name the caller gave bytes).
        problem: the reason alone, starting with a verb ("is truncated: ...").
    """


class TooManyAttachments(MediaRefused):
    """A message carries more images (or clips) than one message may.

    Attributes:
        count: how many it carries.
        limit: how many it may.
    """

    WHAT = "attachments"

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count} {self.WHAT} in one message; Tailor sends at most {limit} (attach fewer, "
                         "or send them over several messages)")
        self.count = count
        self.limit = limit


class TooManyImages(TooManyAttachments):
    WHAT = "images"


class TooManyClips(TooManyAttachments):
    WHAT = "audio clips"


class StoredMediaError(Exception):
    """A file of the media store cannot be given back as it was stored; one line for the user."""


class MediaMissing(StoredMediaError):
    """No file is stored under the hash (removed by hand, or the history came without its media folder)."""


class MediaDamaged(StoredMediaError):
    """The stored file's bytes no longer have the hash it is stored under (changed, or damaged on disk)."""

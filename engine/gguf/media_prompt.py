"""A chat prompt with images (or audio) in it, as the reply loop and the prefix cache see it.

libmtmd cuts a prompt with media into chunks (llama_mtmd.py): runs of text tokens and media chunks, each
taking `n_pos` positions of the sequence. Everything else in the engine (the KV ledger, the prefix tiers,
the reply batch) thinks in token lists, one token a position; so each position of a media chunk gets a
token of its own here: a negative number no vocabulary has, drawn from a hash of the projector, the
media's id (the SHA-256 of its file) and the position in it. Two prompts then share a prefix through an
image exactly when they hold the same image at the same place for the same projector, and the prefix
cache (RAM, disk, parked sequences) keeps a chat with a picture warm with no change of its own: the
picture is not encoded again on the next turn, as llama-server keys its cache by each image's hash.

Two rules keep the pretend tokens from reaching llama.cpp as tokens: a prefix kept from the cache is cut
back to the start of a media span it would end inside (`boundary`), so a media is evaluated whole or not
at all; and the reply batch evaluates a media span through the projector, alone in its batch
(reply_batch.py), never through llama_decode's token path. Drafting follows the conversation only up to
real tokens (prompt_lookup.py's drafts end before any token below 0).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from engine.gguf.llama_mtmd import Bitmap, MediaChunk, Projector, ProjectorError, TextChunk, media
from engine.protocol import Media

# Media tokens are in [-MEDIA_TOKEN_RANGE, -1]: within int32, which the disk tier stores tokens as.
MEDIA_TOKEN_RANGE = 2**31 - 1
_HEX = frozenset("0123456789abcdef")


def media_token(projector_id: str, media_id: str, position: int) -> int:
    """The pretend token of position `position` of a media: negative, the same for the same three inputs."""
    digest = hashlib.blake2b(f"{projector_id}\n{media_id}\n{position}".encode(), digest_size=8).digest()
    return -1 - int.from_bytes(digest, "little") % MEDIA_TOKEN_RANGE


@dataclass(slots=True, frozen=True)
class MediaSpan:
    """Where one media chunk lies in a prompt's token list: tokens [start, end), chunk `chunk` of the Prompt."""

    start: int
    end: int
    chunk: int
    kind: str
    n_tokens: int  # embeddings it decodes (more than its positions where the model uses M-RoPE)


class MediaPrompt:
    """A prompt's tokens (media positions as media tokens) and the chunks that evaluate its media.

    Made by `tokenize_with_media`; close() frees the chunks (the reply batch closes it when the reply ends).
    """

    def __init__(self, projector: Projector, prompt, tokens: list[int], spans: tuple[MediaSpan, ...]):
        self._projector = projector
        self._prompt = prompt
        self.tokens = tokens
        self.spans = spans
        self._starts = [s.start for s in spans]

    def span_at(self, index: int) -> MediaSpan | None:
        """The media span holding token `index`, or None where it is text."""
        i = bisect.bisect_right(self._starts, index) - 1
        if i >= 0 and index < self.spans[i].end:
            return self.spans[i]
        return None

    def next_media(self, index: int) -> int:
        """Where the first media span at or after `index` starts (the prompt's length when none does)."""
        i = bisect.bisect_left(self._starts, index)
        return self.spans[i].start if i < len(self.spans) else len(self.tokens)

    def boundary(self, n: int) -> int:
        """`n` tokens kept from a cache, cut back to the start of the media span it would end inside."""
        span = self.span_at(n) if 0 < n < len(self.tokens) else None
        return span.start if span is not None and span.start < n else n

    def evaluate(self, span: MediaSpan, seq_id: int) -> None:
        """Encode the span's media and decode its embeddings into `seq_id` at its positions.

        NoFreeCells when the KV cache has no room (nothing is left in it), ProjectorError otherwise.
        """
        self._projector.evaluate(self._prompt, span.start, seq_id, span.chunk, span.chunk + 1)

    def close(self) -> None:
        self._prompt.close()


def tokenize_with_media(projector: Projector, projector_id: str, text: str, items: Sequence[Media],
                        add_bos: bool) -> MediaPrompt:
    """`text` (one projector marker per media, in order) and its media as a MediaPrompt.

    ProjectorError, with one line saying why, when a media is malformed, of a kind the projector does not
    take, or its markers are not in the model's vocabulary (a projector made for another model).
    """
    for item in items:
        _check_rate(projector, item)
    with media(*(_bitmap(m) for m in items)) as bitmaps:
        prompt = projector.tokenize(text, bitmaps, add_bos=add_bos)
    try:
        if prompt.unknown_tokens:
            raise ProjectorError(
                f"the markers {projector.path.name} puts around its media are not in the model's vocabulary "
                f"({prompt.unknown_tokens} unknown tokens): the projector was made for another model")
        tokens: list[int] = []
        spans = []
        for index, chunk in enumerate(prompt.chunks):
            if isinstance(chunk, TextChunk):
                tokens.extend(chunk.tokens)
                continue
            assert isinstance(chunk, MediaChunk)
            start = len(tokens)
            tokens.extend(media_token(projector_id, chunk.id, i) for i in range(chunk.n_pos))
            spans.append(MediaSpan(start, len(tokens), index, chunk.kind, chunk.n_tokens))
        return MediaPrompt(projector, prompt, tokens, tuple(spans))
    except BaseException:
        prompt.close()
        raise


def _check_rate(projector: Projector, item: Media) -> None:
    """Audio must come at the rate the projector hears: libmtmd takes samples without their rate, and would
    hear a clip at another rate too fast or too slow (the app resamples: app/services/media/resample.py)."""
    wanted = projector.audio_sample_rate
    if item.kind != "audio" or wanted is None or item.sample_rate == wanted:
        return  # a projector without audio refuses the clip in tokenize, by name
    if item.sample_rate <= 0:
        raise ProjectorError(f"a clip of audio without its sample rate; {projector.path.name} hears {wanted:,} Hz")
    raise ProjectorError(f"a clip of audio at {item.sample_rate:,} Hz; {projector.path.name} hears {wanted:,} Hz "
                         "(resample it first)")


def _bitmap(item: Media) -> Bitmap:
    # The id travels into C as ASCII; anything but a hex digest is replaced by the hash of the content.
    media_id = item.id if item.id and len(item.id) <= 128 and all(c in _HEX for c in item.id) else None
    try:
        if item.kind == "image":
            return Bitmap.image(item.width, item.height, item.data, media_id)
        if item.kind == "audio":
            return Bitmap.audio(item.data, media_id)
    except ValueError as exc:
        raise ProjectorError(f"a malformed {item.kind}: {exc}") from None
    raise ProjectorError(f"a media of unknown kind {item.kind!r}")

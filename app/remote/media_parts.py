"""A message's images and audio clips as OpenAI's chat API carries them: `image_url` content parts holding
`data:` URLs, and `input_audio` parts holding a WAV file in base64.

The engine protocol carries an image as the pixels the intake decoded (RGB rows, upright, at most
MAX_SIDE on its longer side: app/services/media), not as its file, so a remote server gets them encoded
again: JPEG at quality 92, which every OpenAI-compatible server decodes (OpenAI's own API takes PNG,
JPEG, WebP and GIF) and which keeps a 2,048-pixel photo near 1 MB where PNG would take 5 to 10. A clip
is carried as the mono float samples the intake decoded at the rate the model hears (a remote model is sent
16 kHz: remote_engine.REMOTE_SAMPLE_RATE), so it goes as a 16-bit PCM WAV of them, the format every server that
takes `input_audio` reads (OpenAI's takes WAV and MP3); ten minutes at 16 kHz is 19 MB. The images come before
the clips, and both before the text, as the local engine places them (engine/protocol.py, ChatMessage.media).
"""

from __future__ import annotations

import base64
import io
import wave
from typing import Any

import numpy as np
from PIL import Image

from engine.protocol import Media

JPEG_QUALITY = 92


def image_part(media: Media) -> dict[str, Any]:
    """One image as an `image_url` content part with a base64 JPEG `data:` URL."""
    if media.kind != "image":
        raise ValueError(f"{media.kind} is not an image")
    picture = Image.frombytes("RGB", (media.width, media.height), media.data)
    out = io.BytesIO()
    picture.save(out, "JPEG", quality=JPEG_QUALITY)
    url = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def wav_bytes(media: Media) -> bytes:
    """A clip's samples (little-endian float32 in [-1, 1], mono) as a 16-bit PCM WAV file at its rate."""
    if media.kind != "audio" or media.sample_rate <= 0:
        raise ValueError(f"{media.kind} is not a clip with a sample rate")
    samples = np.frombuffer(media.data, dtype="<f4")
    pcm = np.clip(np.round(samples * 32767.0), -32768, 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(media.sample_rate)
        writer.writeframes(pcm.tobytes())
    return out.getvalue()


def audio_part(media: Media) -> dict[str, Any]:
    """One clip as an `input_audio` content part: a WAV file in base64."""
    return {"type": "input_audio",
            "input_audio": {"data": base64.b64encode(wav_bytes(media)).decode("ascii"), "format": "wav"}}


def content_parts(text: str, media: tuple[Media, ...]) -> list[dict[str, Any]]:
    """A user turn's content with its media: the image parts, the audio parts, then the text (left out when
    empty)."""
    parts = [image_part(m) for m in media if m.kind == "image"]
    parts += [audio_part(m) for m in media if m.kind == "audio"]
    if text:
        parts.append({"type": "text", "text": text})
    return parts

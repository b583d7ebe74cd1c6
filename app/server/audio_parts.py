"""OpenAI's `input_audio` content parts: a clip sent inline as base64, `{"type": "input_audio", "input_audio":
{"data": "<base64>", "format": "wav"}}`, checked and decoded here for the model that hears it.

WAV is taken; MP3 (the other format OpenAI's API names) is refused by name with the command that converts it,
as the window and the CLI refuse it: Tailor decodes no compressed audio. A model whose projector takes no audio
refuses the part before anything is decoded (400 model_not_multimodal). The base64 is checked for its length
before it is decoded, and the clip goes through the same intake as the window's and the CLI's (app/services/
media): its WAV header read and checked (channels, rate, length: at most ten minutes) before any sample is
converted, then mixed to one channel and resampled to the rate the projector hears. Each refusal is a 400
naming the part.
"""

from __future__ import annotations

import base64
import binascii

from app.server.errors import ApiError, bad_param
from app.services.media.errors import MediaRefused
from app.services.media.intake import audio_from_bytes
from app.services.media.limits import MAX_AUDIO_FILE_BYTES, check_clip_count
from engine.protocol import Media, ModelInfo

# The base64 of the largest audio file taken (4 characters per 3 bytes), with room for line breaks. The request
# body's own limit (ServerConfig.max_body_bytes, 64 MiB by default) comes first for most clips.
_MAX_BASE64_CHARS = (MAX_AUDIO_FILE_BYTES + 2) // 3 * 4 + 1024
FORMATS = ("wav", "mp3")  # what OpenAI's API names; mp3 is refused by name


def audio_part(part: dict, param: str, model: ModelInfo) -> Media:
    """The clip of one `input_audio` part, decoded at the rate `model` hears.

    Raises:
        ApiError: 400 model_not_multimodal when the model hears nothing; 400 naming the part for anything the
            part holds that cannot be taken.
    """
    if not model.audio or not model.audio_sample_rate:
        raise ApiError(400, f"The model '{model.name}' cannot hear audio: it was loaded without a projector that "
                            "takes audio (start `tailor serve` with an audio model, such as Qwen2-Audio, and its "
                            "--mmproj).", param=param, code="model_not_multimodal")
    value = part.get("input_audio")
    if not isinstance(value, dict):
        raise bad_param(f"{param}.input_audio", f"'{param}.input_audio' must be an object with 'data' (base64) "
                                                "and 'format' (wav).")
    fmt = value.get("format")
    if fmt == "mp3":
        raise bad_param(f"{param}.input_audio.format", "MP3 audio is not read by this server: send WAV (convert "
                                                       "it first: ffmpeg -i clip.mp3 clip.wav).")
    if fmt != "wav":
        raise bad_param(f"{param}.input_audio.format", "'format' must be wav (mp3 is not read by this server).")
    encoded = value.get("data")
    if not isinstance(encoded, str) or not encoded:
        raise bad_param(f"{param}.input_audio.data", f"'{param}.input_audio.data' must be the clip's bytes in base64.")
    if len(encoded) > _MAX_BASE64_CHARS:
        raise bad_param(f"{param}.input_audio.data", f"The clip is over {MAX_AUDIO_FILE_BYTES // 1_000_000} MB.")
    try:
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise bad_param(f"{param}.input_audio.data", "The clip's base64 is malformed.") from None
    try:
        return audio_from_bytes(data, sample_rate=model.audio_sample_rate, name=f"The audio of {param}").as_media()
    except MediaRefused as exc:
        raise bad_param(f"{param}.input_audio", f"{exc}.") from None


def check_clips(parts: list, param: str) -> None:
    """Refuse a message whose content holds more `input_audio` parts than one message may carry (before any is
    decoded)."""
    try:
        check_clip_count([p for p in parts if isinstance(p, dict) and p.get("type") == "input_audio"])
    except MediaRefused as exc:
        raise bad_param(param, f"{exc}.") from None

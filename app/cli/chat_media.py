"""`--image FILE` and `--audio FILE` of `tailor chat`: what the message carries, read and checked before any
model loads.

The projector that will take them is known before the load (the --mmproj file, or the one beside the model),
and its header says what it takes and at which rate it hears; so a clip for a projector that takes no audio
(or a picture for one that sees nothing) is one line at once, and each clip is decoded here at the rate the
projector hears (app/services/media/intake.py), never resampled by the engine.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.errors import CliError
from app.services.media.errors import MediaRefused
from app.services.media.intake import read_audio, read_image
from app.services.media.limits import check_clip_count, check_image_count
from engine.protocol import Media
from models.formats.errors import InvalidModelFile
from models.formats.projector_header import ProjectorInfo, read_projector_info


def add_media_arguments(parser: Any) -> None:
    parser.add_argument(
        "--image", type=Path, action="append", default=[], metavar="FILE",
        help="an image the message carries (PNG, JPEG, WebP, GIF, BMP; repeatable), for a model with a projector",
    )
    parser.add_argument(
        "--audio", type=Path, action="append", default=[], metavar="FILE",
        help="a clip of audio the message carries (WAV; repeatable), for a model whose projector hears "
        "(Qwen2-Audio, Ultravox, Voxtral...)",
    )


def message_media(args: argparse.Namespace, model: Path, mmproj: str | None) -> tuple[Media, ...]:
    """The --image files, then the --audio clips, read and checked (formats, sizes, lengths) against the
    projector that will take them; CliError, one line, for anything that cannot go."""
    if not args.image and not args.audio:
        return ()
    if mmproj is None:
        cannot = " or ".join(w for w, given in (("see images", args.image), ("hear audio", args.audio)) if given)
        raise CliError(f"{model.name} cannot {cannot}: there is no mmproj*.gguf beside it that fits it; "
                       "give its projector with --mmproj FILE")
    info = _projector(Path(mmproj))
    if args.image and not info.has_vision:
        raise CliError(f"{Path(mmproj).name} takes no images, only audio: give a vision projector with --mmproj FILE")
    if args.audio and info.audio is None:
        raise CliError(f"{Path(mmproj).name} takes no audio, only images: give an audio projector "
                       "(Qwen2-Audio, Ultravox, Voxtral...) with --mmproj FILE")
    try:
        check_image_count(args.image)
        check_clip_count(args.audio)
        images = tuple(read_image(p).as_media() for p in args.image)
        clips = tuple(read_audio(p, sample_rate=info.audio.sample_rate).as_media() for p in args.audio) \
            if info.audio is not None else ()
    except MediaRefused as exc:
        raise CliError(str(exc)) from None
    return images + clips


def _projector(path: Path) -> ProjectorInfo:
    try:
        return read_projector_info(path)
    except InvalidModelFile as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{path.name} cannot be read ({exc.strerror or exc})") from None

"""The images and audio clips an import brings in: read as the media intake reads any image or clip, checked, put
into the history's media store, and named by the messages that carry them.

Every image and clip goes through the intake's limits (app/services/media/intake.py): a path that is a FIFO, a
device or a folder is refused by its stat before any open (an import never waits on a pipe), a file over
the size limit before it is read, a decompression bomb by its header before anything decodes it, damaged
bytes when they do not decode; a clip by its WAV header (its layout, its length, that the file holds what the
header promises: it is decoded when sent). A Tailor export names each image and clip by the sha256 of its
bytes: bytes that hash otherwise are refused. Each refusal is an ImageRefused (AudioRefused) naming the image
(clip); the reader leaves it out, keeps its message, and says so in the chat's notes.

Where the bytes are: in the JSON (base64, `data`), or in the folder beside it that the export wrote
(`<export name>-media/<sha256><suffix>`); for ChatGPT's export, in the folder of its conversations.json,
named after the asset id the conversation points at (`file-XXXX-photo.png`, `file_0000…-….webp`, at the
top or one folder down: `dalle-generations/`, `user-…/`). No Qt here.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import os
import re
from pathlib import Path

from app.services.documents.errors import DocumentRefused
from app.services.history.records import AudioRef, FileRef, ImageRef
from app.services.media.errors import AudioRefused, ImageRefused, StoredMediaError
from app.services.media.intake import (
    CheckedAudio,
    PreparedImage,
    checked_audio,
    image_from_bytes,
    read_checked_audio,
    read_image,
)
from app.services.media.limits import DEFAULT_AUDIO_LIMITS, DEFAULT_LIMITS, AudioLimits, ImageLimits
from app.services.media.sniff import AUDIO_SUFFIXES, DOCUMENT_SUFFIXES, SUFFIXES
from app.services.media.store import MediaStore
from models.formats.errors import InvalidModelFile
from models.formats.local_file import open_regular_file

_SHA256 = re.compile(r"[0-9a-f]{64}")
# A ChatGPT asset id as it appears in a file's name: letters, digits, "-" and "_" (file-AbC…, file_0000…).
_ASSET_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
# How many names of the export's folder (and of the folders in it) are listed to find assets: more than any
# export holds, few enough that a folder picked by mistake (a home folder) is not walked for minutes.
MAX_LISTED = 200_000


class ImportMedia:
    """Takes the images and clips of one import into `store`.

    Args:
        store: the history's media store (ChatStore.media).
        source: the file being imported; its folder is where images and clips beside it are looked for.
        limits: the intake's limits for images.
        audio_limits: ... and for clips.
    """

    def __init__(self, store: MediaStore, source: Path, limits: ImageLimits = DEFAULT_LIMITS,
                 audio_limits: AudioLimits = DEFAULT_AUDIO_LIMITS):
        self.store, self.source, self.limits, self.audio_limits = store, source, limits, audio_limits
        self._assets: list[tuple[str, Path]] | None = None  # (file name, path), sorted by name

    # ------------------------------------------------------------ Tailor's export

    def embedded(self, text: object, name: str, sha256: object) -> ImageRef:
        """An image whose bytes the export holds as base64.

        Raises:
            ImageRefused: not base64, too large, not the bytes named, or refused by the intake.
        """
        expected = _checked_hash(sha256, name)
        data = _decoded(text, name, self.limits.max_bytes, ImageRefused)
        return self._take(image_from_bytes(data, name=name, limits=self.limits), expected)

    def embedded_clip(self, text: object, name: str, sha256: object) -> AudioRef:
        """A clip whose bytes the export holds as base64.

        Raises:
            AudioRefused: not base64, too large, not the bytes named, or refused by the intake.
        """
        expected = _checked_hash(sha256, name, AudioRefused)
        data = _decoded(text, name, self.audio_limits.max_bytes, AudioRefused)
        return self._take_clip(checked_audio(data, name=name, limits=self.audio_limits), expected)

    def beside(self, name: str, sha256: object, image_format: object, file: object = None) -> ImageRef:
        """An image in the folder the export wrote beside itself: the folder `file` names ("chats-media/…"),
        else `<export name>-media/`.

        Raises:
            ImageRefused: not there, not a regular file, not the bytes named, or refused by the intake.
        """
        expected = _checked_hash(sha256, name)
        suffix = SUFFIXES.get(image_format) if isinstance(image_format, str) else None
        if suffix is None:
            raise ImageRefused(name, f"has an unknown format {image_format!r}")
        path = self._path_beside(file, f"{expected}{suffix}", name, ImageRefused)
        return self._take(read_image(path, name=name, limits=self.limits), expected)

    def clip_beside(self, name: str, sha256: object, clip_format: object, file: object = None) -> AudioRef:
        """A clip in the folder the export wrote beside itself (as `beside` finds an image).

        Raises:
            AudioRefused: not there, not a regular file, not the bytes named, or refused by the intake.
        """
        expected = _checked_hash(sha256, name, AudioRefused)
        suffix = AUDIO_SUFFIXES.get(clip_format) if isinstance(clip_format, str) else None
        if suffix is None:
            raise AudioRefused(name, f"has an unknown format {clip_format!r}")
        path = self._path_beside(file, f"{expected}{suffix}", name, AudioRefused)
        return self._take_clip(read_checked_audio(path, name=name, limits=self.audio_limits), expected)

    def embedded_file(self, text: object, name: str, sha256: object, file_format: object) -> FileRef:
        """An attached document's original whose bytes the export holds as base64 (`--with-files --embed-media`).

        Raises:
            DocumentRefused: not base64, too large, of an unknown format, or not the bytes named.
        """
        expected = _checked_hash(sha256, name, DocumentRefused)
        suffix = _document_suffix(file_format, name)
        return self._take_file(_decoded(text, name, self.store.max_bytes, DocumentRefused), name, expected,
                               str(file_format), suffix)

    def file_beside(self, name: str, sha256: object, file_format: object, file: object = None) -> FileRef:
        """An attached document's original in the folder the export wrote beside itself (`--with-files`).

        Raises:
            DocumentRefused: not there, not a regular file, too large, or not the bytes named.
        """
        expected = _checked_hash(sha256, name, DocumentRefused)
        suffix = _document_suffix(file_format, name)
        path = self._path_beside(file, f"{expected}{suffix}", name, DocumentRefused)
        try:
            with open_regular_file(path) as opened:
                if os.fstat(opened.fileno()).st_size > self.store.max_bytes:
                    raise DocumentRefused(name, f"is larger than the {self.store.max_bytes:,} bytes Tailor keeps")
                data = opened.read()
        except InvalidModelFile as exc:
            raise DocumentRefused(name, exc.problem) from None
        except OSError as exc:
            raise DocumentRefused(name, f"cannot be read ({exc.strerror or exc})") from None
        return self._take_file(data, name, expected, str(file_format), suffix)

    def _take_file(self, data: bytes, name: str, expected: str, file_format: str, suffix: str) -> FileRef:
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            raise DocumentRefused(name, f"does not hold the bytes the export names (its sha256 is {digest[:12]}…, "
                                        f"not {expected[:12]}…): changed or damaged")
        try:
            self.store.put(data, suffix)
        except (StoredMediaError, ValueError) as exc:
            raise DocumentRefused(name, f"cannot be stored ({exc})") from None
        return FileRef(digest, file_format, name)

    def _path_beside(self, file: object, stored: str, name: str, refused: type[ImageRefused | AudioRefused | DocumentRefused]) -> Path:
        for folder in self._folders_beside(file, stored):
            path = folder / stored
            if os.path.lexists(path):
                return path
        raise refused(name, f"is not beside the export (no {self.source.stem}-media/{stored} next to "
                            f"{self.source.name})")

    def _folders_beside(self, file: object, stored: str) -> list[Path]:
        """Where an image's file may be: the folder the export named (one plain name, nothing above it)
        and the one named after the export file (it may have been renamed since)."""
        folders = []
        if isinstance(file, str):
            folder, _, rest = file.partition("/")
            if rest == stored and folder not in ("", ".", "..") and "\\" not in folder and ":" not in folder:
                folders.append(self.source.parent / folder)
        default = self.source.parent / f"{self.source.stem}-media"
        if default not in folders:
            folders.append(default)
        return folders

    # ------------------------------------------------------------ ChatGPT's export

    def asset(self, asset_id: str) -> ImageRef | None:
        """The image ChatGPT's conversation points at (`file-service://file-XXXX`: "file-XXXX"), from the
        export's folder; None when the folder holds no file of that id (the export came without it).

        Raises:
            ImageRefused: its file is there but refused (not a regular file, too large, a bomb, damaged).
        """
        path = self._find_asset(asset_id)
        if path is None:
            return None
        return self._take(read_image(path, name=path.name, limits=self.limits), None)

    def _find_asset(self, asset_id: str) -> Path | None:
        if not _ASSET_ID.fullmatch(asset_id):
            return None
        assets = self._list_assets()
        at = bisect.bisect_left(assets, (asset_id,))
        for name, path in assets[at:at + 64]:  # the names that start with the id come first
            if not name.startswith(asset_id):
                break
            if name[len(asset_id):][:1] in ("-", ".", ""):  # "file-X-photo.png", not "file-XY-…"
                return path
        return None

    def _list_assets(self) -> list[tuple[str, Path]]:
        """The names in the export's folder and the folders in it, listed once (lstat only: nothing opened)."""
        if self._assets is None:
            found: list[tuple[str, Path]] = []
            for entry in _entries(self.source.parent, MAX_LISTED):
                if entry.is_dir(follow_symlinks=False):
                    found += ((e.name, Path(e.path)) for e in _entries(Path(entry.path), MAX_LISTED - len(found)))
                else:
                    found.append((entry.name, Path(entry.path)))
                if len(found) >= MAX_LISTED:
                    break
            self._assets = sorted(found)
        return self._assets

    # ------------------------------------------------------------ both

    def _take(self, image: PreparedImage, expected: str | None) -> ImageRef:
        if expected is not None and image.sha256 != expected:
            raise ImageRefused(image.name, f"does not hold the bytes the export names (its sha256 is "
                                           f"{image.sha256[:12]}…, not {expected[:12]}…): changed or damaged")
        try:
            self.store.put(image.original, image.suffix)
        except (StoredMediaError, ValueError) as exc:
            raise ImageRefused(image.name, f"cannot be stored ({exc})") from None
        return ImageRef.of(image)

    def _take_clip(self, clip: CheckedAudio, expected: str) -> AudioRef:
        if clip.sha256 != expected:
            raise AudioRefused(clip.name, f"does not hold the bytes the export names (its sha256 is "
                                          f"{clip.sha256[:12]}…, not {expected[:12]}…): changed or damaged")
        try:
            self.store.put(clip.original, clip.suffix)
        except (StoredMediaError, ValueError) as exc:
            raise AudioRefused(clip.name, f"cannot be stored ({exc})") from None
        return AudioRef.of(clip)


def _checked_hash(sha256: object, name: str, refused: type[ImageRefused | AudioRefused | DocumentRefused] = ImageRefused) -> str:
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise refused(name, f"is named by {sha256!r}, which is no sha256")
    return sha256


def _document_suffix(file_format: object, name: str) -> str:
    suffix = DOCUMENT_SUFFIXES.get(file_format) if isinstance(file_format, str) else None
    if suffix is None:
        raise DocumentRefused(name, f"has an unknown format {file_format!r}")
    return suffix


def _decoded(text: object, name: str, max_bytes: int, refused: type[ImageRefused | AudioRefused | DocumentRefused]) -> bytes:
    """The bytes of an embedded file's base64, its length checked before it is decoded."""
    if not isinstance(text, str):
        raise refused(name, f"has data that is a {type(text).__name__}, not base64 text")
    if len(text) > 4 * (max_bytes // 3 + 1):  # refused before it is decoded
        raise refused(name, f"is larger than the {max_bytes:,} bytes Tailor takes")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise refused(name, "has data that is not valid base64") from None


def _entries(folder: Path, limit: int) -> list[os.DirEntry]:
    if limit <= 0:
        return []
    found = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                found.append(entry)
                if len(found) >= limit:
                    break
    except OSError:
        return []
    return found

"""The images and audio clips of a chat history, kept content-addressed beside it: `<history>-media/ab/ab12…ef.png`,
`…/cd/cd34…01.wav`.

A file's name is the sha256 of its bytes (sharded by its first two hex digits) and the suffix of its
format; the same bytes are stored once however many messages carry them. A file is written whole or not
at all (a temporary file, fsync, renamed into place, the folder fsynced), is never changed after, and is
checked against its name whenever it is read back. The history records which messages use which hashes;
when chats go, it calls `collect` with the hashes still used and the rest are removed.

`put` should come just before the history saves the message that uses the file. Between the two the file is
used by nothing, so `collect` leaves alone any file younger than a grace period (a `put` of bytes already
stored makes their file young again), whichever process of the same history runs it (the window, `tailor
chat`, `tailor serve`). Files are private to the user (0600), like the chats.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.services.history.backup import sync_to_disk
from app.services.media.errors import MediaDamaged, MediaMissing, StoredMediaError
from app.services.media.limits import MAX_STORED_BYTES
from app.services.media.sniff import AUDIO_SUFFIXES, DOCUMENT_SUFFIXES, SUFFIXES
from models.formats.errors import InvalidModelFile
from models.formats.local_file import open_regular_file

# The suffixes a stored file may have: the formats the intake takes, and documents' originals.
STORED_SUFFIXES = (frozenset(SUFFIXES.values()) | frozenset(AUDIO_SUFFIXES.values())
                   | frozenset(DOCUMENT_SUFFIXES.values()))

# How long `collect` leaves an unused file alone after it was put: the time between attaching (or sending)
# an image and the history saving the message that carries it, with room for a slow disk or a second
# process. A file so spared goes at a later collect.
COLLECT_GRACE_S = 15 * 60

# A leftover temporary file (a `put` or a `collect` cut off by a crash or a power cut) older than this is
# removed by `collect`; a younger one may belong to a `put` still writing in another process.
STALE_TEMP_S = 24 * 3600

_HASH = re.compile(r"[0-9a-f]{64}")
_SHARD = re.compile(r"[0-9a-f]{2}")
_STORED_NAME = re.compile(r"([0-9a-f]{64})(\.[a-z0-9]+)")


def media_folder(db_path: Path) -> Path:
    """The media folder of the history at `db_path`: `chats-media` beside `chats.sqlite3`; a history of
    its own (`--db other.sqlite3`) has a folder of its own, so one history's collect never takes another's
    files."""
    return db_path.parent / f"{db_path.stem}-media"


@dataclass(frozen=True, slots=True)
class StoredMedia:
    """A file in the store: its hash, where it is, its size, and whether this `put` wrote it."""

    sha256: str
    path: Path
    size: int
    added: bool


@dataclass(frozen=True, slots=True)
class Collected:
    """What a `collect` did: the hashes removed, the bytes freed, the unused ones spared as too young."""

    removed: tuple[str, ...]
    freed_bytes: int
    spared: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MediaStore:
    """The content-addressed files under `folder` (see the module's notes). No state but the folder.

    Attributes:
        folder: where the files are (media_folder(history) for a chat history).
        max_bytes: the largest file it reads back; anything larger is damage (the intake stores no larger).
    """

    folder: Path
    max_bytes: int = MAX_STORED_BYTES

    @classmethod
    def beside(cls, db_path: Path) -> MediaStore:
        """The store of the chat history at `db_path`."""
        return cls(media_folder(db_path))

    def put(self, data: bytes, suffix: str) -> StoredMedia:
        """Store `data` under its sha256 with `suffix` (".png"...), once: bytes already there (and intact)
        are not written again, only marked as just used. A damaged copy is replaced.

        Raises:
            ValueError: `suffix` is not one the store keeps, or `data` is larger than `max_bytes` (the intake
                refuses such files first).
            StoredMediaError: it cannot be written (disk full, no permission...); nothing is left behind.
        """
        if suffix not in STORED_SUFFIXES:
            raise ValueError(f"the media store keeps no {suffix!r} files")
        if len(data) > self.max_bytes:
            raise ValueError(f"the media store keeps files of up to {self.max_bytes} bytes, not {len(data)}")
        digest = hashlib.sha256(data).hexdigest()
        existing = self.path_of(digest)
        if existing is not None and self._holds(existing, digest):
            try:
                os.utime(existing)  # young again, so a collect running now spares it
                return StoredMedia(digest, existing, len(data), added=False)
            except FileNotFoundError:
                pass  # taken by a collect meanwhile: written anew below
            except OSError as exc:
                raise StoredMediaError(f"Cannot store an {_noun(suffix)} in {self.folder}: {exc.strerror or exc}") from None
        target = existing or self._path(digest, suffix)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_whole(target, data)
        except OSError as exc:
            raise StoredMediaError(f"Cannot store an {_noun(suffix)} in {self.folder}: {exc.strerror or exc}") from None
        return StoredMedia(digest, target, len(data), added=True)

    def path_of(self, sha256: str) -> Path | None:
        """The file stored under `sha256`, or None when there is none.

        Raises:
            ValueError: `sha256` is not 64 lowercase hex digits (it never names a path outside the store).
        """
        _check_hash(sha256)
        for suffix in sorted(STORED_SUFFIXES):
            path = self._path(sha256, suffix)
            if os.path.lexists(path):
                return path
        return None

    def read(self, sha256: str) -> bytes:
        """The bytes stored under `sha256`, checked against it.

        Raises:
            ValueError: `sha256` is not a sha256 in hex.
            MediaMissing: nothing is stored under it.
            MediaDamaged: the file is not a regular file, is too large, or its bytes have another hash.
        """
        path = self.path_of(sha256)
        if path is None:
            raise MediaMissing(f"The image {sha256[:12]}… is not in {self.folder} (removed, or the chat "
                               "history was moved without its media folder)")
        return self._read_checked(path, sha256)

    def hashes(self) -> set[str]:
        """The hashes of every file stored."""
        return {digest for digest, _ in self._entries()}

    def remove(self, sha256: str) -> bool:
        """Remove the file stored under `sha256` now, used or not; False when there was none."""
        path = self.path_of(sha256)
        if path is None:
            return False
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # only when it was the shard's last file
        return True

    def collect(self, used: Iterable[str], *, grace_s: float = COLLECT_GRACE_S,
                now: float | None = None) -> Collected:
        """Remove every stored file whose hash is not in `used` and that was put more than `grace_s`
        seconds before `now`; also leftover temporary files older than STALE_TEMP_S, and emptied shards.

        A file a `put` makes young while it is being removed is kept: it is first renamed aside, and
        brought back if its time changed meanwhile.
        """
        keep = set(used)
        now = time.time() if now is None else now
        removed: list[str] = []
        spared: list[str] = []
        freed = 0
        for digest, path in list(self._entries()):
            if digest in keep:
                continue
            outcome = _remove_if_older(path, now - grace_s)
            if outcome == "spared":
                spared.append(digest)
            elif outcome is not None:
                removed.append(digest)
                freed += outcome
        self._sweep(now)
        return Collected(tuple(removed), freed, tuple(spared))

    def _path(self, sha256: str, suffix: str) -> Path:
        return self.folder / sha256[:2] / f"{sha256}{suffix}"

    def _shards(self) -> Iterator[Path]:
        try:
            children = list(self.folder.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return
        for child in children:
            if _SHARD.fullmatch(child.name) and child.is_dir():
                yield child

    def _entries(self) -> Iterator[tuple[str, Path]]:
        for shard in self._shards():
            for path in shard.iterdir():
                match = _STORED_NAME.fullmatch(path.name)
                if match and match[1].startswith(shard.name) and match[2] in STORED_SUFFIXES:
                    yield match[1], path

    def _holds(self, path: Path, sha256: str) -> bool:
        try:
            self._read_checked(path, sha256)
        except StoredMediaError:
            return False
        return True

    def _read_checked(self, path: Path, sha256: str) -> bytes:
        what = f"The stored {_noun(path.suffix)}"
        try:
            file = open_regular_file(path)
        except InvalidModelFile as exc:
            raise MediaDamaged(f"{what} {path} {exc.problem}") from None
        try:
            with file:
                size = os.fstat(file.fileno()).st_size
                if size > self.max_bytes:
                    raise MediaDamaged(f"{what} {path} is {size} bytes, larger than any Tailor "
                                       "stores: it was changed or damaged")
                data = file.read(self.max_bytes + 1)
        except OSError as exc:
            raise MediaDamaged(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise MediaDamaged(f"{what} {path} no longer has the bytes it was stored with "
                               "(changed or damaged on disk); refusing it")
        return data

    def _sweep(self, now: float) -> None:
        for shard in list(self._shards()):
            for path in shard.iterdir():
                if path.name.startswith("."):
                    with contextlib.suppress(OSError):
                        if now - path.lstat().st_mtime > STALE_TEMP_S:
                            path.unlink()
            with contextlib.suppress(OSError):
                shard.rmdir()  # only when empty


def _noun(suffix: str) -> str:
    """What a file of `suffix` holds, for messages ("an" goes before each): "audio clip" (.wav), "attached
    document" (.pdf...), "image"."""
    if suffix in AUDIO_SUFFIXES.values():
        return "audio clip"
    return "attached document" if suffix in DOCUMENT_SUFFIXES.values() else "image"


def _check_hash(sha256: str) -> None:
    if not isinstance(sha256, str) or not _HASH.fullmatch(sha256):
        raise ValueError(f"not a sha256 in lowercase hex: {sha256!r}")


def _write_whole(target: Path, data: bytes) -> None:
    """Write `data` to `target` whole or not at all: a temporary file beside it, fsynced, renamed over it."""
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # Windows cannot open a folder to fsync it; its rename stands
        sync_to_disk(target.parent)


def _remove_if_older(path: Path, cutoff: float) -> int | Literal["spared"] | None:
    """Remove `path` if its time is before `cutoff` and return its size; "spared" if it is younger; None if
    it was gone already.

    It is renamed aside first and its time read there: a `put` that made it young before the rename is
    seen, and one after it finds no file and writes it anew.
    """
    aside = path.with_name(f".{path.name}.{os.getpid()}.removing")
    try:
        os.replace(path, aside)
    except FileNotFoundError:
        return None
    info = aside.lstat()
    if info.st_mtime >= cutoff:
        if os.path.lexists(path):  # written anew meanwhile: the same bytes
            aside.unlink()
        else:
            os.replace(aside, path)
        return "spared"
    aside.unlink()
    return info.st_size

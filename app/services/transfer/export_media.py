"""The images and audio clips an export carries, read from the history's media store, each checked against its
hash.

They travel in one of two ways. Embedded: base64 in the JSON (`"data"`), a `data:` URI in HTML (an `<img>`, or an
`<audio>` player), so one file holds everything. Beside: in a folder next to the export, `<export name>-media/<sha256><suffix>`,
which the JSON names (`"file"`, a relative path) and Markdown links; a file is written whole (user_files),
never through a link or onto a FIFO, and once per export however many messages carry it. An image (or clip)
whose stored file is missing or damaged is left out, said once in `problems`, and the export goes on (the JSON
still names it, so an import says it is missing rather than losing the trace of it). No Qt here.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from app.services.history.records import AudioRef, FileRef, ImageRef
from app.services.media.errors import StoredMediaError
from app.services.media.store import MediaStore
from app.services.transfer.user_files import TargetRefused, what_is_at, write_bytes_whole
from models.formats.errors import InvalidModelFile
from models.formats.local_file import open_regular_file

MIME_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif", "BMP": "image/bmp",
              "WAV": "audio/wav", "PDF": "application/pdf",
              "DOCX": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
              "MD": "text/markdown", "HTML": "text/html", "CSV": "text/csv", "TXT": "text/plain"}
MediaRef = ImageRef | AudioRef | FileRef


def media_folder_of(target: Path) -> Path:
    """The folder of images and clips beside the export file `target`: `chats.json` → `chats-media/`."""
    return target.with_name(f"{target.stem}-media")


class ExportMedia:
    """What one export does with its images and clips: embed them, or write them into `folder` (None: neither;
    the JSON then names them only, and Markdown and HTML say "[image: name]", "[audio: name · 0:12]").

    Args:
        store: the history's media store (ChatStore.media).
        embed: base64 in the JSON. HTML always embeds what it can read: it is one page.
        folder: where files beside the export go (media_folder_of(target)); made when the first is written.
        overwrite: replace a file there of the same name that holds other bytes (the user agreed).
        with_files: the originals of attached documents travel as images do (`--with-files`: they may be large).

    Attributes:
        problems: one line for each image or clip that could not be exported (missing or damaged in the store).
    """

    def __init__(self, store: MediaStore, *, embed: bool = False, folder: Path | None = None,
                 overwrite: bool = False, with_files: bool = False):
        self.store, self.embed, self.folder, self.overwrite = store, embed, folder, overwrite
        self.with_files = with_files  # attached documents' originals travel too (else they are named only)
        self.problems: list[str] = []
        self._failed: set[str] = set()
        self._written: set[str] = set()

    def read(self, ref: MediaRef) -> bytes | None:
        """The original bytes of `ref`, or None (said once in `problems`) when its stored file cannot be read."""
        if ref.sha256 in self._failed:
            return None
        try:
            return self.store.read(ref.sha256)
        except (StoredMediaError, ValueError) as exc:
            self._failed.add(ref.sha256)
            self.problems.append(f"{ref.name} was left out of the export: {exc}")
            return None

    def base64(self, ref: MediaRef) -> str | None:
        """The original bytes as base64 (the JSON's `data`), or None."""
        data = self.read(ref)
        return None if data is None else base64.b64encode(data).decode("ascii")

    def data_uri(self, ref: MediaRef) -> str | None:
        """The image or clip as a `data:` URI for HTML, or None."""
        encoded = self.base64(ref)
        return None if encoded is None else f"data:{MIME_TYPES.get(ref.format, 'application/octet-stream')};base64,{encoded}"

    def beside(self, ref: MediaRef) -> str | None:
        """Write the image or clip into `folder` (once) and give its path relative to the export ("chats-media/ab…12.png",
        with "/" on every system), or None when there is no folder or the image cannot be read.

        Raises:
            TargetRefused: the folder, or the file's name in it, is something that cannot be written (a FIFO,
                a link, a file where the folder should be): the export stops, as for its own file.
        """
        if self.folder is None or not ref.suffix:
            return None
        link = f"{self.folder.name}/{ref.sha256}{ref.suffix}"
        if ref.sha256 in self._written:
            return link
        data = self.read(ref)
        if data is None:
            return None
        self._prepare_folder()
        target = self.folder / f"{ref.sha256}{ref.suffix}"
        if not _holds(target, ref.sha256):
            write_bytes_whole(target, data, overwrite=self.overwrite)
        self._written.add(ref.sha256)
        return link

    def _prepare_folder(self) -> None:
        if self._written:
            return
        found = what_is_at(self.folder)
        if found is None:
            try:
                self.folder.mkdir()
            except FileExistsError:
                pass
            except OSError as exc:
                raise TargetRefused(f"Cannot write into {self.folder}: {exc.strerror or exc}") from None
        elif found != "a folder":
            raise TargetRefused(f"Cannot write into {self.folder}: it is {found}")


def _holds(path: Path, sha256: str) -> bool:
    """Whether `path` is a regular file holding the bytes of `sha256` already (an export written again)."""
    try:
        if what_is_at(path) != "file":
            return False
        with open_regular_file(path) as file:  # non-blocking, checked again on the descriptor
            return hashlib.file_digest(file, "sha256").hexdigest() == sha256
    except (OSError, TargetRefused, InvalidModelFile):
        return False

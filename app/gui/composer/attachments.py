"""The images, audio clips and documents that go with the next message: a strip above the message box, an image
as its thumbnail, a clip as a chip (a sound icon, its name and length), a document as a chip (a file icon, its
name and pages), each with its remove button.

They come from the Attach button, a paste or a drop (Composer's `files_given`/`image_pasted`). Each is read,
checked and decoded by the media intake (app/services/media) on a pool thread: a 50 MB photo takes a moment to
decode, a 250 MB recording to read, and the window must not wait for it (a clip is checked by its header here,
and decoded when it is sent, at the rate of the model that hears it); a file that cannot be taken (a FIFO,
a decompression bomb, an SVG, an MP3, the 17th image or the 5th clip) is refused by name in one line
(`refused`), and nothing else changes. A file goes to the audio intake when its suffix is one of audio's (WAV,
MP3, FLAC...: the intake reads WAV and names the others with the command that converts them), else to the
image intake; the bytes decide what it is either way. A file whose name says document (PDF, DOCX, Markdown, text,
code, HTML, CSV: app/services/documents/extract.py) is extracted on the pool thread when attached, so what is sent
is what was read then, even if the file changes or goes before Send; a scanned page without text is named.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QStyle, QToolButton, QVBoxLayout, QWidget

from app.gui.common.jobs import Jobs
from app.services.documents.document import Document
from app.services.documents.errors import DocumentRefused
from app.services.documents.extract import kind_of_name
from app.services.documents.kept import KeptDocument, read_and_keep
from app.services.documents.limits import MAX_DOCUMENTS_PER_MESSAGE
from app.services.history.records import FileRef
from app.services.media.errors import MediaRefused
from app.services.media.intake import (
    CheckedAudio,
    PreparedImage,
    checked_audio,
    image_from_bytes,
    is_audio,
    read_checked_audio,
    read_image,
)
from app.services.media.limits import MAX_CLIPS_PER_MESSAGE, MAX_IMAGES_PER_MESSAGE
from app.services.media.sniff import AUDIO_FILE_SUFFIXES
from app.services.media.store import MediaStore
from app.services.media.wav import clock

THUMBNAIL = 64  # pixels, the longer side

CHIP_WIDTH = 150  # pixels: room for a short name and its length


def thumbnail(image: PreparedImage, side: int = THUMBNAIL) -> QPixmap:
    """A pixmap of `image` scaled to fit `side` × `side`, keeping its aspect."""
    qimage = QImage(image.rgb, image.width, image.height, 3 * image.width, QImage.Format.Format_RGB888)
    return QPixmap.fromImage(qimage.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio,
                                           Qt.TransformationMode.SmoothTransformation))


def png_bytes(image: QImage) -> bytes:
    """`image` as a PNG file's bytes (QImage is safe to use off the GUI thread; QPixmap is not)."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise MediaRefused("The pasted image could not be written as PNG")
    return bytes(buffer.data())


def is_audio_path(path: Path) -> bool:
    """Whether a file goes to the audio intake (by its suffix: the intake then reads its bytes)."""
    return path.suffix.lower() in AUDIO_FILE_SUFFIXES


def clip_label(clip: CheckedAudio) -> str:
    """A clip as its chip names it: "question.wav · 0:12"."""
    return f"{clip.name} · {clock(clip.seconds)}"


def is_document_path(path: Path) -> bool:
    """Whether a file goes to the document reader: a name that says document (no image's or audio's does)."""
    return kind_of_name(path.name) is not None


def document_label(document: Document) -> str:
    """A document as its chip names it: "report.pdf · 12 pages"."""
    return f"{document.name} · {document.pages} pages" if document.pages else document.name


def _remove_button(name: str, on_click: Callable[[], None], parent: QWidget) -> QToolButton:
    button = QToolButton(parent)
    button.setText("×")
    button.setToolTip(f"Remove {name}")
    button.setAccessibleName(f"Remove {name}")
    button.setAutoRaise(True)
    button.clicked.connect(on_click)
    return button


class _Thumb(QWidget):
    """One image: its thumbnail, its name as a tooltip, a × that removes it."""

    def __init__(self, image: PreparedImage, on_remove, parent: QWidget | None = None):
        super().__init__(parent)
        self.item = image
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(0)
        self.picture = QLabel()
        self.picture.setPixmap(thumbnail(image))
        self.picture.setFixedSize(QSize(THUMBNAIL, THUMBNAIL))
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setToolTip(f"{image.name} · {image.full_width} × {image.full_height}")
        self.remove_button = _remove_button(image.name, lambda: on_remove(self), self)
        layout.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignRight)
        layout.addWidget(self.picture)


class _ChipBody(QWidget):
    """A chip of the strip: a × that removes it above an icon of the style's and a wrapped label, with a
    tooltip and an accessible name (an audio clip's, a document's)."""

    def __init__(self, name: str, icon: QStyle.StandardPixmap, label: str, tooltip: str, accessible: str,
                 on_remove, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(0)
        self.remove_button = _remove_button(name, lambda: on_remove(self), self)
        layout.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignRight)
        body = self.body = QWidget()
        body.setFixedSize(QSize(CHIP_WIDTH, THUMBNAIL))
        row = QHBoxLayout(body)
        row.setContentsMargins(4, 0, 4, 0)
        self.icon = QLabel()
        self.icon.setPixmap(self.style().standardIcon(icon).pixmap(24, 24))
        self.label = QLabel(label)
        self.label.setWordWrap(True)
        row.addWidget(self.icon)
        row.addWidget(self.label, 1)
        body.setToolTip(tooltip)
        body.setAccessibleName(accessible)
        layout.addWidget(body)


class _Chip(_ChipBody):
    """One audio clip: the style's sound icon, its name and length, a × that removes it (no playback: the
    window has no multimedia module)."""

    def __init__(self, clip: CheckedAudio, on_remove, parent: QWidget | None = None):
        channels = {1: "mono", 2: "stereo"}.get(clip.channels, f"{clip.channels} channels")
        super().__init__(clip.name, QStyle.StandardPixmap.SP_MediaVolume, clip_label(clip),
                         f"{clip_label(clip)} · {clip.source_rate / 1000:g} kHz {channels}",
                         f"Audio clip {clip.name}, {clock(clip.seconds)}", on_remove, parent)
        self.item = clip


class _DocumentChip(_ChipBody):
    """One document: the style's file icon, its name and pages, its warnings as a tooltip, a × that removes it."""

    def __init__(self, document: Document, on_remove, parent: QWidget | None = None, path: Path | None = None,
                 original: FileRef | None = None):
        tip = [f"{document_label(document)} · {len(document.text):,} characters", *document.warnings]
        super().__init__(document.name, QStyle.StandardPixmap.SP_FileIcon, document_label(document), "\n".join(tip),
                         f"Document {document_label(document)}", on_remove, parent)
        self.item = document
        self.path = path  # where it was read (None: given as bytes)
        self.original = original  # its bytes, kept in the history's media store (None: not kept)


class Attachments(QWidget):
    """The strip of images, clips and documents waiting to be sent; hidden while there are none.

    Args:
        limit: the most images a message carries.
        clip_limit: the most audio clips a message carries.
        document_limit: the most documents a message carries.

    Signals:
        changed(): an image, a clip or a document was added or removed.
        refused(str): one line saying why a file was not taken, or what of a document could not be read.
    """

    changed = Signal()
    refused = Signal(str)

    def __init__(self, parent: QWidget | None = None, limit: int = MAX_IMAGES_PER_MESSAGE,
                 clip_limit: int = MAX_CLIPS_PER_MESSAGE, document_limit: int = MAX_DOCUMENTS_PER_MESSAGE,
                 media_store: MediaStore | None = None):
        super().__init__(parent)
        self.media_store = media_store  # where documents' originals are kept when attached (None: not kept)
        self._limits = {"image": limit, "clip": clip_limit, "document": document_limit}
        self._jobs = Jobs(self, max_threads=1)  # one at a time: they keep the order they were given in
        self._pending = {"image": 0, "clip": 0, "document": 0}
        self._entries: list[_Thumb | _Chip | _DocumentChip] = []
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setFixedHeight(THUMBNAIL + 36)
        inner = QWidget()
        self._row = QHBoxLayout(inner)
        self._row.setContentsMargins(0, 0, 0, 0)
        # While files are read: "Reading report.pdf…" at the end of the row (a 60-page PDF takes a moment).
        self.reading = QLabel("")
        self.reading.setAccessibleName("Files being read")
        self.reading.hide()
        self._row.addWidget(self.reading)
        self._row.addStretch(1)
        self._names_reading: list[str] = []
        scroll.setWidget(inner)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.setVisible(False)

    @property
    def images(self) -> tuple[PreparedImage, ...]:
        return tuple(e.item for e in self._entries if isinstance(e, _Thumb))

    @property
    def clips(self) -> tuple[CheckedAudio, ...]:
        return tuple(e.item for e in self._entries if isinstance(e, _Chip))

    @property
    def documents(self) -> tuple[Document, ...]:
        return tuple(e.item for e in self._entries if isinstance(e, _DocumentChip))

    @property
    def document_files(self) -> tuple[FileRef, ...]:
        """The originals of the attached documents that were kept, in order."""
        return tuple(e.original for e in self._entries if isinstance(e, _DocumentChip) and e.original is not None)

    def documents_gone(self) -> list[str]:
        """The names of the attached documents whose files are no longer where they were read (deleted or
        moved since): what was read when they were attached is what goes."""
        return [e.item.name for e in self._entries
                if isinstance(e, _DocumentChip) and e.path is not None and not e.path.exists()]

    @property
    def entries(self) -> tuple[QWidget, ...]:
        """The strip's thumbnails and chips, in the order they were added."""
        return tuple(self._entries)

    @property
    def busy(self) -> bool:
        """Files are still being read: a send now would go without them."""
        return any(self._pending.values())

    def add_files(self, paths: list[Path]) -> None:
        """Read each file in the background; each becomes a thumbnail or a chip, or a `refused` line."""
        for path in paths:
            if is_document_path(path):
                if self._room_for_one(path.name, "document"):
                    self._read("document", lambda p=path: (read_and_keep(p, self.media_store), p), path.name)
            elif is_audio_path(path):
                if self._room_for_one(path.name, "clip"):
                    self._read("clip", lambda p=path: read_checked_audio(p))
            elif self._room_for_one(path.name, "image"):
                self._read("image", lambda p=path: read_image(p))

    def add_bytes(self, data: bytes, name: str) -> None:
        """An image or a clip given as bytes (a paste), read like a file."""
        if is_audio(data):
            if self._room_for_one(name, "clip"):
                self._read("clip", lambda: checked_audio(data, name=name))
        elif self._room_for_one(name, "image"):
            self._read("image", lambda: image_from_bytes(data, name=name))

    def add_qimage(self, image: QImage, name: str = "pasted image.png") -> None:
        """A pasted image (a screenshot): written as PNG and read like a file, both in the background."""
        if self._room_for_one(name, "image"):
            copy = image.copy()  # the clipboard's image may change under a pool thread
            self._read("image", lambda: image_from_bytes(png_bytes(copy), name=name))

    def clear(self) -> None:
        for entry in self._entries:
            entry.deleteLater()
        self._entries.clear()
        self.setVisible(False)
        self.changed.emit()

    def remove(self, entry: _Thumb | _Chip | _DocumentChip) -> None:
        if entry in self._entries:
            self._entries.remove(entry)
            entry.deleteLater()
            self.setVisible(bool(self._entries) or self.reading.isVisibleTo(self))
            self.changed.emit()

    def _room_for_one(self, name: str, kind: str) -> bool:
        held = len({"image": self.images, "clip": self.clips, "document": self.documents}[kind])
        limit = self._limits[kind]
        if held + self._pending[kind] >= limit:
            what = {"image": "images", "clip": "audio clips", "document": "documents"}[kind]
            self.refused.emit(f"{name} was not attached: a message carries at most {limit} {what}.")
            return False
        return True

    def _read(self, kind: str, read, name: str = "") -> None:
        self._pending[kind] += 1
        self._names_reading.append(name)
        self._show_reading()
        self._jobs.run(read, lambda item: self._taken(kind, item, name), lambda exc: self._refused(kind, exc, name))

    def _show_reading(self) -> None:
        names = [n for n in self._names_reading if n]
        if names:
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            self.reading.setText(f"Reading {names[0]}{more}…")
        self.reading.setVisible(bool(names))
        self.setVisible(bool(self._entries) or bool(names))

    def _done_reading(self, kind: str, name: str) -> None:
        self._pending[kind] -= 1
        self._names_reading.remove(name)
        self._show_reading()

    def _taken(self, kind: str, item: PreparedImage | CheckedAudio | tuple[KeptDocument, Path], name: str = "") -> None:
        self._done_reading(kind, name)
        if isinstance(item, tuple):
            kept, path = item
            item = kept.document
            entry = _DocumentChip(item, self.remove, path=path, original=kept.original)
            for warning in (*item.warnings, *([kept.problem] if kept.problem else [])):  # said, not left out silently
                self.refused.emit(f"{item.name}: {warning}")
        else:
            entry = _Thumb(item, self.remove) if isinstance(item, PreparedImage) else _Chip(item, self.remove)
        self._entries.append(entry)
        self._row.insertWidget(self._row.count() - 2, entry)  # before the reading line and the stretch
        self.setVisible(True)
        self.changed.emit()

    def _refused(self, kind: str, error: BaseException, name: str = "") -> None:
        self._done_reading(kind, name)
        what = {"image": "image", "clip": "audio clip", "document": "document"}[kind]
        named = isinstance(error, MediaRefused | DocumentRefused)
        self.refused.emit(f"{str(error).rstrip('.')}." if named else f"The {what} could not be read: {error}")

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait for the files being read (a closing window, a test)."""
        return self._jobs.wait(timeout_ms)

"""The images that go with the next message: thumbnails above the message box, each with its remove button.

Images come from the Attach button, a paste or a drop (Composer's `files_given`/`image_pasted`). Each is read,
checked and decoded by the media intake (app/services/media) on a pool thread: a 50 MB photo takes a moment
to decode and the window must not wait for it; a file that cannot be taken (a FIFO, a decompression bomb, an
SVG, the 17th image) is refused by name in one line (`refused`), and nothing else changes.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QToolButton, QVBoxLayout, QWidget

from app.gui.common.jobs import Jobs
from app.services.media.errors import MediaRefused
from app.services.media.intake import PreparedImage, image_from_bytes, read_image
from app.services.media.limits import MAX_IMAGES_PER_MESSAGE

THUMBNAIL = 64  # pixels, the longer side


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


class _Thumb(QWidget):
    """One image: its thumbnail, its name as a tooltip, a × that removes it."""

    def __init__(self, image: PreparedImage, on_remove, parent: QWidget | None = None):
        super().__init__(parent)
        self.image = image
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(0)
        self.picture = QLabel()
        self.picture.setPixmap(thumbnail(image))
        self.picture.setFixedSize(QSize(THUMBNAIL, THUMBNAIL))
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setToolTip(f"{image.name} · {image.full_width} × {image.full_height}")
        self.remove_button = QToolButton(self)
        self.remove_button.setText("×")
        self.remove_button.setToolTip(f"Remove {image.name}")
        self.remove_button.setAccessibleName(f"Remove {image.name}")
        self.remove_button.setAutoRaise(True)
        self.remove_button.clicked.connect(lambda: on_remove(self))
        layout.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignRight)
        layout.addWidget(self.picture)


class Attachments(QWidget):
    """The strip of images waiting to be sent; hidden while there are none.

    Signals:
        changed(): an image was added or removed.
        refused(str): one line saying why an image was not taken.
    """

    changed = Signal()
    refused = Signal(str)

    def __init__(self, parent: QWidget | None = None, limit: int = MAX_IMAGES_PER_MESSAGE):
        super().__init__(parent)
        self._limit = limit
        self._jobs = Jobs(self, max_threads=1)  # one at a time: they keep the order they were given in
        self._pending = 0
        self._thumbs: list[_Thumb] = []
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setFixedHeight(THUMBNAIL + 36)
        inner = QWidget()
        self._row = QHBoxLayout(inner)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.addStretch(1)
        scroll.setWidget(inner)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.setVisible(False)

    @property
    def images(self) -> tuple[PreparedImage, ...]:
        return tuple(t.image for t in self._thumbs)

    @property
    def busy(self) -> bool:
        """Images are still being read: a send now would go without them."""
        return self._pending > 0

    def add_files(self, paths: list[Path]) -> None:
        """Read each file in the background; each becomes a thumbnail, or a `refused` line."""
        for path in paths:
            if self._room_for_one(path.name):
                self._read(lambda p=path: read_image(p))

    def add_bytes(self, data: bytes, name: str) -> None:
        """An image given as bytes (a paste), read like a file."""
        if self._room_for_one(name):
            self._read(lambda: image_from_bytes(data, name=name))

    def add_qimage(self, image: QImage, name: str = "pasted image.png") -> None:
        """A pasted image (a screenshot): written as PNG and read like a file, both in the background."""
        if self._room_for_one(name):
            copy = image.copy()  # the clipboard's image may change under a pool thread
            self._read(lambda: image_from_bytes(png_bytes(copy), name=name))

    def clear(self) -> None:
        for thumb in self._thumbs:
            thumb.deleteLater()
        self._thumbs.clear()
        self.setVisible(False)
        self.changed.emit()

    def remove(self, thumb: _Thumb) -> None:
        if thumb in self._thumbs:
            self._thumbs.remove(thumb)
            thumb.deleteLater()
            self.setVisible(bool(self._thumbs))
            self.changed.emit()

    def _room_for_one(self, name: str) -> bool:
        if len(self._thumbs) + self._pending >= self._limit:
            self.refused.emit(f"{name} was not attached: a message carries at most {self._limit} images.")
            return False
        return True

    def _read(self, read) -> None:
        self._pending += 1
        self._jobs.run(read, self._taken, self._refused)

    def _taken(self, image: PreparedImage) -> None:
        self._pending -= 1
        thumb = _Thumb(image, self.remove)
        self._thumbs.append(thumb)
        self._row.insertWidget(self._row.count() - 1, thumb)
        self.setVisible(True)
        self.changed.emit()

    def _refused(self, error: BaseException) -> None:
        self._pending -= 1
        self.refused.emit(f"{error}." if isinstance(error, MediaRefused) else f"The image could not be read: {error}")

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait for the images being read (a closing window, a test)."""
        return self._jobs.wait(timeout_ms)

"""A message's images in the transcript: thumbnails in its HTML, full size in a viewer when one is clicked.

The transcript is a QTextBrowser; a thumbnail is an `<img src="tailor-thumb:<sha256>">` whose pixels the
document asks its browser for (ChatView.loadResource). Decoding a stored photo takes a moment, so the
first ask gets a blank of the thumbnail's size and starts the decode on a pool thread; when it is done the
thumbnail becomes a resource of the document and the layout is redone. A file gone from the store stays a
blank with the image's name as its tooltip; the chat is never touched.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QObject, Qt, QUrl
from PySide6.QtGui import QGuiApplication, QImage, QKeySequence, QPalette, QPixmap, QShortcut, QTextDocument
from PySide6.QtWidgets import QDialog, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.gui.common.jobs import Jobs
from app.services.history.records import ImageRef
from app.services.media.intake import PreparedImage, stored_image
from app.services.media.store import MediaStore

THUMB_SCHEME = "tailor-thumb"  # <img src>: the thumbnail's pixels
IMAGE_SCHEME = "tailor-image"  # <a href>: open the image full size
THUMB_SIDE = 160  # the longer side of a thumbnail in the transcript, in pixels


def thumb_size(width: int, height: int, side: int = THUMB_SIDE) -> tuple[int, int]:
    """The size of a thumbnail of a `width` × `height` image: its longer side `side`, never enlarged."""
    longest = max(width, height, 1)
    scale = min(1.0, side / longest)
    return max(1, round(width * scale)), max(1, round(height * scale))


def images_html(images: tuple[ImageRef, ...]) -> str:
    """The thumbnails of a message's images, in order, each a link to the image full size."""
    if not images:
        return ""
    cells = []
    for ref in images:
        w, h = thumb_size(ref.width, ref.height)
        name = html.escape(ref.name, quote=True)
        cells.append(f'<a href="{IMAGE_SCHEME}:{ref.sha256}"><img src="{THUMB_SCHEME}:{ref.sha256}" width="{w}" '
                     f'height="{h}" alt="{name}" title="{name}"></a>')
    return "<p>" + "&nbsp;".join(cells) + "</p>"


def image_of(prepared: PreparedImage) -> QImage:
    """The decoded pixels as a QImage (a copy: it owns its bytes)."""
    return QImage(prepared.rgb, prepared.width, prepared.height, 3 * prepared.width,
                  QImage.Format.Format_RGB888).copy()


class TranscriptImages(QObject):
    """The thumbnails of one transcript, decoded in the background and kept by hash; full size on a click.

    Args:
        store: the history's media store (where the originals are).
        document: the transcript's document (a decoded thumbnail becomes its resource).
    """

    def __init__(self, store: MediaStore, document: QTextDocument, parent: QObject | None = None):
        super().__init__(parent)
        self._store, self._document = store, document
        self._jobs = Jobs(self, max_threads=1)
        self._thumbs: dict[str, QImage] = {}
        self._loading: set[str] = set()
        self.failed: dict[str, str] = {}  # sha256 -> why its file could not be shown

    def thumbnail(self, sha256: str, size: tuple[int, int]) -> QImage:
        """The thumbnail, or a blank of `size` while it is decoded (or when its file is gone)."""
        image = self._thumbs.get(sha256)
        if image is not None:
            return image
        if sha256 not in self._loading and sha256 not in self.failed:
            self._loading.add(sha256)
            self._jobs.run(lambda: self._decode_thumb(sha256), lambda img: self._thumb_ready(sha256, img),
                           lambda exc: self._thumb_failed(sha256, exc))
        blank = QImage(max(1, size[0]), max(1, size[1]), QImage.Format.Format_RGB32)
        blank.fill(QGuiApplication.palette().color(QPalette.ColorRole.Midlight))
        return blank

    def _decode_thumb(self, sha256: str) -> QImage:
        image = image_of(stored_image(self._store, sha256))
        return image.scaled(THUMB_SIDE, THUMB_SIDE, Qt.AspectRatioMode.KeepAspectRatio,
                            Qt.TransformationMode.SmoothTransformation)

    def _thumb_ready(self, sha256: str, image: QImage) -> None:
        self._loading.discard(sha256)
        self._thumbs[sha256] = image
        self._document.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"{THUMB_SCHEME}:{sha256}"), image)
        self._document.markContentsDirty(0, self._document.characterCount())

    def _thumb_failed(self, sha256: str, exc: BaseException) -> None:
        self._loading.discard(sha256)
        self.failed[sha256] = str(exc)

    @property
    def busy(self) -> bool:
        return bool(self._loading)

    def ready(self, sha256: str) -> bool:
        """Whether the image's thumbnail was decoded (and is the document's resource now)."""
        return sha256 in self._thumbs

    def open(self, sha256: str, parent: QWidget) -> ImageViewer:
        """The image full size in a window of its own (decoded in the background; Esc closes it)."""
        viewer = ImageViewer(parent)
        viewer.show()
        self._jobs.run(lambda: image_of(stored_image(self._store, sha256)), viewer.show_image, viewer.show_error)
        return viewer


class ImageViewer(QDialog):
    """One image at its own size (scrolled where larger than the screen's share); Esc or Ctrl+W closes it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Image")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.label = QLabel("Opening…")
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        scroll = QScrollArea()
        scroll.setWidget(self.label)
        scroll.setWidgetResizable(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)
        QShortcut(QKeySequence.StandardKey.Close, self, activated=self.close)
        self.resize(640, 480)

    def show_image(self, image: QImage) -> None:
        self.label.setPixmap(QPixmap.fromImage(image))
        self.setWindowTitle(f"Image · {image.width()} × {image.height()}")
        screen = self.screen().availableGeometry() if self.screen() else None
        if screen is not None:
            self.resize(min(image.width() + 24, int(screen.width() * 0.9)),
                        min(image.height() + 24, int(screen.height() * 0.9)))

    def show_error(self, exc: BaseException) -> None:
        self.label.setText(f"The image cannot be shown: {exc}")

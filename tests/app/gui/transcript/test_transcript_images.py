"""A message's images in the transcript: thumbnails decoded in the background from the history's media store,
full size in a viewer on a click; a file gone from the store leaves a blank, never an error."""

from __future__ import annotations

import time
from pathlib import Path

from PIL import Image
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument

from app.gui.transcript.images import IMAGE_SCHEME, THUMB_SCHEME, ImageViewer
from app.gui.transcript.view import ChatView
from app.services.history.store import ImageRef, Message
from app.services.media.intake import read_image
from app.services.media.store import MediaStore

TIMEOUT_MS = 10_000


def stored(store: MediaStore, path: Path, size: tuple[int, int], colour: str) -> ImageRef:
    Image.new("RGB", size, colour).save(path)
    image = read_image(path)
    store.put(image.original, image.suffix)
    return ImageRef(image.sha256, image.format, path.name, image.full_width, image.full_height)


def message_with(*images: ImageRef) -> Message:
    return Message(1, 1, "user", "Look at these.", "complete", None, time.time(), images=images)


def test_thumbnails_come_from_the_store_and_a_click_opens_the_image_full_size(qtbot, tmp_path: Path):
    store = MediaStore(tmp_path / "media")
    wide = stored(store, tmp_path / "wide.png", (800, 400), "red")
    tall = stored(store, tmp_path / "tall.jpg", (300, 600), "blue")
    view = ChatView()
    qtbot.addWidget(view)
    view.use_media_store(store)
    view.set_messages([message_with(wide, tall)])
    html = view.toHtml()
    assert f"{THUMB_SCHEME}:{wide.sha256}" in html and 'width="160"' in html and 'height="80"' in html
    assert "Look at these." in view.plain_text()
    resource = lambda ref: view.document().resource(QTextDocument.ResourceType.ImageResource,  # noqa: E731
                                                    QUrl(f"{THUMB_SCHEME}:{ref.sha256}"))
    assert resource(wide) is not None and resource(tall) is not None  # blanks while they decode
    qtbot.waitUntil(lambda: view.images.ready(wide.sha256) and view.images.ready(tall.sha256), timeout=TIMEOUT_MS)
    assert (resource(wide).width(), resource(wide).height()) == (160, 80)
    assert resource(tall).pixelColor(40, 80).blue() > 200
    opened: list[ImageViewer] = []
    view.image_opened.connect(lambda sha: opened.append(view.images.open(sha, view)))
    view.transcript_actions.open_link(QUrl(f"{IMAGE_SCHEME}:{wide.sha256}"))
    (viewer,) = opened
    qtbot.waitUntil(lambda: viewer.label.pixmap() is not None and not viewer.label.pixmap().isNull(),
                    timeout=TIMEOUT_MS)
    assert (viewer.label.pixmap().width(), viewer.label.pixmap().height()) == (800, 400)
    viewer.close()


def test_an_image_gone_from_the_store_stays_a_blank_and_the_message_is_shown(qtbot, tmp_path: Path):
    store = MediaStore(tmp_path / "media")
    gone = stored(store, tmp_path / "gone.png", (200, 100), "green")
    store.path_of(gone.sha256).unlink()
    view = ChatView()
    qtbot.addWidget(view)
    view.use_media_store(store)
    view.set_messages([message_with(gone)])
    url = QUrl(f"{THUMB_SCHEME}:{gone.sha256}")
    blank = view.document().resource(QTextDocument.ResourceType.ImageResource, url)  # as painting asks for it
    assert (blank.width(), blank.height()) == (160, 80)
    qtbot.waitUntil(lambda: gone.sha256 in view.images.failed, timeout=TIMEOUT_MS)
    assert "Look at these." in view.plain_text()
    assert gone.sha256[:12] in view.images.failed[gone.sha256] and not view.images.ready(gone.sha256)

"""Images attached to the next message: dropped, pasted or chosen files become thumbnails with a remove button;
files that cannot be taken are refused by name, and the window goes on."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image
from PySide6.QtCore import QMimeData, QUrl
from PySide6.QtGui import QColor, QImage

from app.gui.composer.attachments import Attachments
from app.gui.composer.message_box import Composer

TIMEOUT_MS = 10_000


def picture(path: Path, size: tuple[int, int] = (120, 80), colour: str = "red") -> Path:
    Image.new("RGB", size, colour).save(path)
    return path


def test_dropped_image_files_are_attached_in_order_and_other_files_stay_text(qtbot, tmp_path: Path):
    composer, strip = Composer(), Attachments()
    qtbot.addWidget(composer)
    qtbot.addWidget(strip)
    composer.files_given.connect(strip.add_files)
    a, b = picture(tmp_path / "a.png"), picture(tmp_path / "b.JPG", colour="blue")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(a)), QUrl.fromLocalFile(str(notes)), QUrl.fromLocalFile(str(b))])
    assert composer.canInsertFromMimeData(mime)
    composer.insertFromMimeData(mime)
    qtbot.waitUntil(lambda: len(strip.images) == 2 and not strip.busy, timeout=TIMEOUT_MS)
    assert [i.name for i in strip.images] == ["a.png", "b.JPG"]
    assert [d.text for d in strip.documents] == ["hello"]  # a text file is a document now
    assert composer.toPlainText() == ""  # the files were attached, not typed
    other = tmp_path / "disk.img"
    other.write_bytes(b"\0" * 16)
    text = QMimeData()
    text.setUrls([QUrl.fromLocalFile(str(other))])
    composer.insertFromMimeData(text)
    assert str(other) in composer.toPlainText()  # a file of no kind Tailor reads is text, as before


def test_a_pasted_screenshot_is_attached_as_png(qtbot):
    composer, strip = Composer(), Attachments()
    qtbot.addWidget(composer)
    qtbot.addWidget(strip)
    composer.image_pasted.connect(strip.add_qimage)
    image = QImage(300, 200, QImage.Format.Format_RGB32)
    image.fill(QColor("green"))
    mime = QMimeData()
    mime.setImageData(image)
    composer.insertFromMimeData(mime)
    qtbot.waitUntil(lambda: len(strip.images) == 1, timeout=TIMEOUT_MS)
    (pasted,) = strip.images
    assert pasted.format == "PNG" and (pasted.width, pasted.height) == (300, 200)
    assert pasted.rgb[:3] == bytes((0, 128, 0))


def test_a_removed_image_goes_and_an_emptied_strip_hides(qtbot, tmp_path: Path):
    strip = Attachments()
    qtbot.addWidget(strip)
    strip.show()
    strip.add_files([picture(tmp_path / "a.png"), picture(tmp_path / "b.png")])
    qtbot.waitUntil(lambda: len(strip.images) == 2, timeout=TIMEOUT_MS)
    first = strip.entries[0]
    with qtbot.waitSignal(strip.changed, timeout=TIMEOUT_MS):
        first.remove_button.click()
    assert [i.name for i in strip.images] == ["b.png"] and strip.isVisible()
    strip.clear()
    assert strip.images == () and not strip.isVisible()


def test_files_that_cannot_be_taken_are_refused_by_name(qtbot, tmp_path: Path):
    strip = Attachments(limit=3)
    qtbot.addWidget(strip)
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    bomb = tmp_path / "bomb.png"
    Image.new("1", (20_000, 20_000)).save(bomb, optimize=True)  # 400 M pixels in a few hundred KB
    fake = tmp_path / "fake.png"
    fake.write_text("not an image")
    refused: list[str] = []
    strip.refused.connect(refused.append)
    strip.add_files([fifo, bomb, fake])
    qtbot.waitUntil(lambda: len(refused) == 3, timeout=TIMEOUT_MS)
    assert strip.images == () and not strip.busy
    assert {r.split(" ")[0] for r in refused} == {"pipe.png", "bomb.png", "fake.png"}
    assert any("FIFO" in r for r in refused) and any("pixels" in r for r in refused)
    good = [picture(tmp_path / f"{i}.png") for i in range(4)]
    strip.add_files(good)  # one more than the limit
    qtbot.waitUntil(lambda: len(strip.images) == 3 and not strip.busy, timeout=TIMEOUT_MS)
    assert refused[-1].startswith("3.png was not attached: a message carries at most 3 images")

"""Render assets/tailor.svg to the PNG sizes desktops and installers ask for (Qt's SVG renderer, offscreen).

Run after editing the SVG: `.venv/bin/python packaging/render_icons.py [--out DIR]`.
Writes DIR/tailor-<N>.png for every size in SIZES, and DIR/tailor.ico (Windows); DIR defaults to assets/icons.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402 (the platform must be chosen before Qt loads)
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "assets" / "tailor.svg"
OUT_DIR = ROOT / "assets" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)  # .ico holds at most 256×256


def render(renderer: QSvgRenderer, size: int) -> QImage:
    """One square, transparent, antialiased rendering of the SVG."""
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    return image


def main() -> int:
    parser = argparse.ArgumentParser(description="Render the app icon's PNGs and .ico from assets/tailor.svg.")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder to write (default: %(default)s)")
    out_dir = parser.parse_args().out
    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        print(f"render_icons: {SOURCE} is not a valid SVG", file=sys.stderr)
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    for size in SIZES:
        path = out_dir / f"tailor-{size}.png"
        if not render(renderer, size).save(str(path)):
            print(f"render_icons: could not write {path}", file=sys.stderr)
            return 1
        print(path)
    # Qt's ICO writer stores one image: 256×256, which Windows scales down for the smaller places.
    ico = out_dir / "tailor.ico"
    if not render(renderer, 256).save(str(ico), "ICO"):
        print(f"render_icons: no ICO writer here; {ico.name} not written", file=sys.stderr)
    else:
        print(ico)
    return 0


if __name__ == "__main__":
    sys.exit(main())

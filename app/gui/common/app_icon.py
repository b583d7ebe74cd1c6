"""The application icon (assets/icons, rendered from assets/tailor.svg), from a checkout or the bundle."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtGui import QIcon

ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def assets_dir() -> Path:
    """assets/ of the checkout, or the copy inside a PyInstaller bundle (packaging/tailor.spec)."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle is not None:
        return Path(bundle) / "assets"
    return Path(__file__).resolve().parents[3] / "assets"  # app/gui/common/ → the checkout


def app_icon(folder: Path | None = None) -> QIcon:
    """Tailor's icon at every size there is a PNG for (an empty icon when none is found)."""
    folder = folder or assets_dir() / "icons"
    icon = QIcon()
    for size in ICON_SIZES:
        path = folder / f"tailor-{size}.png"
        if path.is_file():
            icon.addFile(str(path), QSize(size, size))
    return icon

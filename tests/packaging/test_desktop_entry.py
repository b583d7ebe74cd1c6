"""Desktop integration files: the .desktop entry validates, the icons exist at every size, rendered from the SVG."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QSize
from PySide6.QtGui import QImage

from app.gui.common.app_icon import ICON_SIZES, app_icon, assets_dir

ROOT = Path(__file__).resolve().parents[2]
DESKTOP = ROOT / "assets" / "tailor.desktop"
# Points of assets/tailor.svg (its viewBox is 64×64) well inside one shape, and that shape's fill: the pixel
# holding such a point is wholly covered at every icon size, so it has exactly this colour, opaque.
TILE, BAR, DOT = "#2b4c7e", "#f4f1ea", "#e7a33e"
INSIDE = {(32, 8): TILE, (12, 40): TILE, (32, 23): BAR, (46, 44): DOT}
# Antialiased edges may round a little differently from one Qt release to the next; a wrong image is far off.
EDGE_TOLERANCE = 8


def colour_at(image: QImage, x: int, y: int) -> str:
    """The colour of the pixel holding the SVG's point (x, y), with its alpha unless opaque."""
    colour = image.pixelColor(x * image.width() // 64, y * image.height() // 64)
    return colour.name() if colour.alpha() == 255 else f"{colour.name()} alpha {colour.alpha()}"


def pixels(image: QImage) -> bytes:
    """The image's pixels, premultiplied ARGB row by row (the form QIcon's pixmaps come in)."""
    premultiplied = image.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)
    return bytes(premultiplied.constBits())[: premultiplied.sizeInBytes()]


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate missing (apt-get install desktop-file-utils; .ci/run installs it)")
def test_the_desktop_entry_validates():
    result = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr  # not even hints


def test_the_desktop_entry_names_the_app_its_icon_and_categories():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # keys are case-sensitive
    entry.read(DESKTOP, encoding="utf-8")
    group = entry["Desktop Entry"]
    assert group["Type"] == "Application" and group["Name"] == "Tailor" and group["Exec"] == "tailor"
    assert group["Icon"] == "tailor" and group["Terminal"] == "false"
    assert group["Categories"].endswith(";") and group["Categories"].strip(";")


def test_the_icons_exist_at_every_size(qtbot):
    assert assets_dir() == ROOT / "assets"
    icon = app_icon()
    assert sorted(s.width() for s in icon.availableSizes()) == sorted(ICON_SIZES)
    for size in ICON_SIZES:
        image = QImage(str(ROOT / "assets" / "icons" / f"tailor-{size}.png"))
        assert (image.width(), image.height()) == (size, size)
        # The tile (not an empty canvas), the T and the dot, each in its colour.
        assert {point: colour_at(image, *point) for point in INSIDE} == INSIDE, size
        assert image.pixelColor(0, 0).alpha() == 0  # rounded corners stay transparent
        # The icon the window shows is these very pixels at this size.
        assert pixels(icon.pixmap(QSize(size, size), 1.0).toImage()) == pixels(image), size


def test_the_icons_are_rendered_from_the_svg(tmp_path: Path):
    """packaging/render_icons.py writes every size from assets/tailor.svg (so the PNGs can be remade)."""
    script = ROOT / "packaging" / "render_icons.py"
    result = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    for size in ICON_SIZES:
        fresh = QImage(str(tmp_path / f"tailor-{size}.png"))
        committed = QImage(str(ROOT / "assets" / "icons" / f"tailor-{size}.png"))
        assert fresh.size() == committed.size()
        # The same picture: every channel of every pixel within the edges' rounding.
        worst = max(abs(a - b) for a, b in zip(pixels(fresh), pixels(committed), strict=True))
        assert worst <= EDGE_TOLERANCE, f"tailor-{size}.png differs from its rendering by up to {worst}/255"
    assert (tmp_path / "tailor.ico").is_file()

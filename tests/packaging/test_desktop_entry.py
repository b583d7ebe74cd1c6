"""Desktop integration files: the .desktop entry validates, the icons exist at every size, rendered from the SVG."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app.gui.app_icon import ICON_SIZES, app_icon, assets_dir

ROOT = Path(__file__).resolve().parents[2]
DESKTOP = ROOT / "assets" / "tailor.desktop"


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
    for size in ICON_SIZES:
        image = QImage(str(ROOT / "assets" / "icons" / f"tailor-{size}.png"))
        assert (image.width(), image.height()) == (size, size)
        assert image.pixelColor(size // 2, size // 8).alpha() == 255  # the tile, not an empty canvas
        assert image.pixelColor(0, 0).alpha() == 0  # rounded corners stay transparent
    icon = app_icon()
    assert sorted(s.width() for s in icon.availableSizes()) == sorted(ICON_SIZES)


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
    assert (tmp_path / "tailor.ico").is_file()

"""The QSettings of the window: its geometry, the side panel, the welcome shown once, the preferences."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings

from app.services.paths import APP_NAME


def app_settings() -> QSettings:
    """Tailor's GUI settings: the user's, or an ini file under $TAILOR_HOME when it is set (tests)."""
    home = os.environ.get("TAILOR_HOME")
    if home:
        return QSettings(str(Path(home) / "settings.ini"), QSettings.Format.IniFormat)
    return QSettings(APP_NAME, APP_NAME)

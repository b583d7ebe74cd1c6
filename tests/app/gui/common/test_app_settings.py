"""The window's QSettings: the user's, or an ini file under $TAILOR_HOME (the tests' own folder)."""

from __future__ import annotations

from pathlib import Path

from app.gui.common.app_settings import app_settings


def test_settings_follow_tailor_home(_tailor_home: Path):
    settings = app_settings()
    assert settings.fileName() == str(_tailor_home / "settings.ini")

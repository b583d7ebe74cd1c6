"""The Qt window of Tailor."""

from app.gui import pyside_fix

pyside_fix.install()

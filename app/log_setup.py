"""Logging of the front ends: to a rotating file in the user log dir, never the terminal."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path


def configure_logging(log_file: Path, level: int = logging.INFO) -> None:
    """Send this process's log records to `log_file` (5 MB, 3 old files kept)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=5 * 1024 * 1024, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)

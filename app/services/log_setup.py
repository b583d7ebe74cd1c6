"""Logging of the front ends: to this process's own file in the user log dir, never the terminal."""

from __future__ import annotations

import logging
from pathlib import Path

from engine.process_log import open_process_log


def configure_logging(log_file: Path, level: int = logging.INFO) -> Path:
    """Send this process's log records to its own file beside `log_file`; returns that file's path.

    `log_file` names the kind (`tailor.log` -> `tailor-<start>-<pid>.log`, see engine.process_log).
    """
    handler = open_process_log(log_file)
    root = logging.getLogger()
    for old in root.handlers:
        old.close()
    root.handlers[:] = [handler]
    root.setLevel(level)
    return Path(handler.baseFilename)

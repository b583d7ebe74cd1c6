"""A knowledge folder's documents, listed without following links.

Links are never followed: a link inside the folder may lead anywhere (~/.ssh, /etc, a mounted disk, a loop
back into the folder), and what the user chose to share with a model is the folder, not what it points
at. So a symbolic link (to a file or a folder) is reported as skipped, with where it leads if outside;
hidden files and folders (.git, .venv, .env) are passed over quietly, as are files of kinds Tailor does not
read (images, archives); FIFOs, sockets and devices are reported. The listing holds paths and stats only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.services.documents.extract import kind_of_name
from models.formats.local_file import kind_of


@dataclass(frozen=True, slots=True)
class Listed:
    """A document found in the folder: its path, kind, and the stat seen (links not followed)."""

    path: Path
    kind: str
    info: os.stat_result


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something in the folder that is not read, and why (one line)."""

    path: Path
    reason: str


def walk_folder(root: Path) -> Iterator[Listed | Skipped]:
    """The documents under `root` in a stable order (by name, depth first), and what was skipped."""
    root = Path(root)
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError as exc:
            yield Skipped(folder, f"cannot be listed ({exc.strerror or exc})")
            continue
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith("."):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:  # gone since the listing
                continue
            if stat.S_ISLNK(info.st_mode):
                yield Skipped(path, _link_reason(path, root))
            elif stat.S_ISDIR(info.st_mode):
                subfolders.append(path)
            elif not stat.S_ISREG(info.st_mode):
                yield Skipped(path, f"is {kind_of(info.st_mode)}, not a document; it was not opened")
            elif (kind := kind_of_name(entry.name)) is not None:
                yield Listed(path, kind, info)
        pending.extend(reversed(subfolders))


def _link_reason(path: Path, root: Path) -> str:
    try:
        target = path.resolve(strict=False)
        inside = target.is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a loop of links
        return "is a symbolic link that cannot be resolved; links are not followed"
    if inside:
        return "is a symbolic link; links are not followed (what it points to in the folder is read there)"
    return f"is a symbolic link out of the folder (to {target}); links are not followed"

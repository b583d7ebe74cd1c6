"""Knowledge indexes: named document indexes kept in Tailor's data folder (`tailor index FOLDER --name NAME`
writes one, `tailor chat --knowledge NAME` searches it), one SQLite file each under <data>/knowledge/.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.services.documents.index.store import DocumentIndex

# A name is a file name too: letters, digits, dot, dash and underscore, not starting with a dot.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
SUFFIX = ".sqlite3"


class KnowledgeError(ValueError):
    """A knowledge name that is not valid, or names no index: one line, saying what exists."""


def knowledge_dir(data_dir: Path) -> Path:
    return data_dir / "knowledge"


def knowledge_path(data_dir: Path, name: str) -> Path:
    """The file of the index `name` (KnowledgeError for a name that cannot be a file name)."""
    if not _NAME.fullmatch(name):
        raise KnowledgeError(f"{name!r} is not a knowledge name: use letters, digits, '.', '-' and '_' "
                             "(at most 64, not starting with '.')")
    return knowledge_dir(data_dir) / f"{name}{SUFFIX}"


def knowledge_names(data_dir: Path) -> list[str]:
    """The knowledge indexes there are, sorted."""
    folder = knowledge_dir(data_dir)
    return sorted(p.name.removesuffix(SUFFIX) for p in folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []


def open_knowledge(data_dir: Path, name: str) -> DocumentIndex:
    """The existing index `name` (KnowledgeError, naming those there are, when there is none)."""
    path = knowledge_path(data_dir, name)
    if not path.is_file():
        names = knowledge_names(data_dir)
        there = f"the knowledge indexes are: {', '.join(names)}" if names else "there is none yet"
        raise KnowledgeError(f"no knowledge index is named {name!r} ({there}); make one with "
                             f"`tailor index FOLDER --name {name}`")
    return DocumentIndex(path)


def create_knowledge(data_dir: Path, name: str) -> DocumentIndex:
    """The index `name`, made (with its folder) when it does not exist yet."""
    path = knowledge_path(data_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return DocumentIndex(path)

"""The test session's own user folders, and a guard that the real user's are left alone.

tests/conftest.py calls `isolate()` when pytest imports it, before any test module imports the app:
HOME, the XDG folders, the Hugging Face cache and TAILOR_HOME then point into one temporary folder,
for the test process and every process it starts (engines, servers, the CLI). Otherwise the model
picker lists and plans the developer's real hub cache, Speculative: Auto may draft with a real
model, and tests pass or fail by what is on the machine.

`UserFolders` is a snapshot of what Tailor could write in the real user's folders (its own folders
where platformdirs puts them, the hub cache, Qt's settings file); the session's end compares it with
a new one and fails the run when anything there was made or changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Tailor"  # as app/services/paths.py names it (not imported: the app must not be imported yet)

# Unset for the session: the hub cache variables would point past HF_HOME at the user's own cache,
# and a token would be sent to the test hubs.
UNSET = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@dataclass(frozen=True, slots=True)
class SessionHome:
    """The temporary folder that stands in for the user's home during a test session."""

    root: Path

    @property
    def environment(self) -> dict[str, str]:
        home = self.root / "home"
        return {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            # The hub cache is $HF_HOME/hub: tests that give themselves an HF_HOME get its cache.
            "HF_HOME": str(home / ".cache" / "huggingface"),
            # Each test gets its own (tests/conftest.py); this one serves what runs outside a test.
            "TAILOR_HOME": str(self.root / "tailor-home"),
        }

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def real_user_folders() -> list[Path]:
    """Where Tailor and its libraries write for the user running the tests (read before `isolate`)."""
    hf_home = Path(os.environ.get("HF_HOME") or Path(platformdirs.user_cache_dir()) / "huggingface")
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    folders = [
        Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)),
        Path(hub) if hub else hf_home / "hub",
    ]
    if os.environ.get("TAILOR_HOME"):
        folders.append(Path(os.environ["TAILOR_HOME"]))
    return folders


@dataclass(frozen=True, slots=True)
class UserFolders:
    """Every file and folder under some folders, with its size and modification time."""

    entries: frozenset[tuple[str, int, int]]

    @classmethod
    def snapshot(cls, folders: list[Path]) -> UserFolders:
        entries = set()
        for folder in folders:
            for path in _walk(folder):
                try:
                    st = path.lstat()
                except OSError:
                    continue
                entries.add((str(path), st.st_size, st.st_mtime_ns))
        return cls(frozenset(entries))

    def changes_since(self, before: UserFolders) -> list[str]:
        """The paths made, changed or removed between `before` and this snapshot."""
        return sorted({path for path, _, _ in self.entries ^ before.entries})


def _walk(folder: Path):
    """The folder itself (when it exists) and everything under it, links not followed."""
    if not folder.exists() and not folder.is_symlink():
        return
    yield folder
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            yield Path(root) / name


def isolate() -> SessionHome:
    """Point the user's folders at a new temporary folder, for this process and its children."""
    home = SessionHome(Path(tempfile.mkdtemp(prefix="tailor-tests-")))
    for path in home.environment.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    for name in UNSET:
        os.environ.pop(name, None)
    os.environ.update(home.environment)
    return home

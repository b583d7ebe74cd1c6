"""The test session's user folders: everything that decides where Tailor writes points inside the
session's temporary folder (tests/isolation.py), in this process and in the processes it starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from tests.conftest import SESSION_HOME
from tests.isolation import UserFolders


def _inside(path: str | Path) -> bool:
    return Path(path).resolve().is_relative_to(SESSION_HOME.root.resolve())


def test_the_user_folders_of_this_process_are_the_sessions(monkeypatch: pytest.MonkeyPatch):
    import huggingface_hub.constants

    from app.services.paths import AppPaths
    from app.services.planning.load_planner import LoadPlanner
    from models.hub.cache import hub_cache_dir

    monkeypatch.delenv("TAILOR_HOME")  # the fallback: the platform's folders, as a user without it has
    paths = AppPaths.default()
    where = [Path.home(), paths.data_dir, paths.cache_dir, paths.log_dir, hub_cache_dir(),
             huggingface_hub.constants.HF_HUB_CACHE, platformdirs.user_config_dir("Tailor"),
             LoadPlanner()._status_dir]
    assert [p for p in where if not _inside(p)] == []


def test_the_window_settings_without_tailor_home_are_the_sessions(qapp, monkeypatch: pytest.MonkeyPatch):
    from app.gui.common.app_settings import app_settings

    monkeypatch.delenv("TAILOR_HOME")
    settings = app_settings()
    assert _inside(settings.fileName()), settings.fileName()


def test_a_child_process_sees_the_same_folders(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TAILOR_HOME")  # the platform's folders: under the session's HOME
    code = ("import json, pathlib; from models.hub.cache import hub_cache_dir; from app.services.paths import AppPaths;"
            "print(json.dumps([str(pathlib.Path.home()), str(hub_cache_dir()), str(AppPaths.default().cache_dir)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert [p for p in json.loads(out.stdout) if not _inside(p)] == []


def test_the_guard_sees_a_file_made_changed_or_removed(tmp_path: Path):
    watched = tmp_path / "Tailor"
    (watched / "engines").mkdir(parents=True)
    kept = watched / "engines" / "kept.json"
    kept.write_text("{}")
    before = UserFolders.snapshot([watched, tmp_path / "absent"])
    assert UserFolders.snapshot([watched, tmp_path / "absent"]).changes_since(before) == []
    (watched / "engines" / "new.json").write_text("{}")
    kept.write_text('{"changed": true}')
    (tmp_path / "absent").mkdir()
    changes = UserFolders.snapshot([watched, tmp_path / "absent"]).changes_since(before)
    assert changes == sorted([str(watched / "engines"), str(watched / "engines" / "new.json"), str(kept),
                              str(tmp_path / "absent")])

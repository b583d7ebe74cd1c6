"""The bundle-aware lookups of the engine: the starter model inside a frozen app, and the AWQ engine's status."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from engine.starter import BUNDLED_STARTER_DIR, STARTER_FILE, bundled_starter_path, starter_model_path
from engine.torch_available import NO_TORCH, EngineStatus, awq_engine_status


def test_outside_a_bundle_the_starter_comes_from_its_package(starter_model: Path):
    assert getattr(sys, "_MEIPASS", None) is None
    assert bundled_starter_path() is None
    assert starter_model_path() == starter_model and "site-packages" in str(starter_model)


def test_a_bundle_dir_with_the_starter_is_found(tmp_path: Path, starter_model: Path):
    assert bundled_starter_path(str(tmp_path)) is None  # a bundle without it: the package lookup decides
    (tmp_path / BUNDLED_STARTER_DIR).mkdir()
    copy = tmp_path / BUNDLED_STARTER_DIR / STARTER_FILE
    shutil.copyfile(starter_model, copy)
    assert bundled_starter_path(str(tmp_path)) == copy


def test_awq_engine_available_where_torch_is_installed():
    assert awq_engine_status() == EngineStatus(True)


def test_awq_engine_unavailable_without_torch_says_so(tmp_path: Path):
    # A real interpreter in which torch cannot be found: the site-packages are left out (-S, -I),
    # only the repository is on the path, as in a bundle built without PyTorch.
    repo = Path(__file__).resolve().parents[2]
    code = (
        f"import sys; sys.path.insert(0, {str(repo)!r}); "
        "from engine.torch_available import awq_engine_status; s = awq_engine_status(); "
        "print(s.available, s.reason, sep='|')"
    )
    out = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"False|{NO_TORCH}"

"""PlanCache: each model of the library is planned once per file, settings and machine, and again when
the file, the library or the machine changes. The real LoadPlanner plans real files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from app.services.load_settings import LoadSettings
from app.services.planning.draft_finder import DraftFinder, library_ggufs
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.plan_cache import PlanCache, stamp_of
from models.hardware.profile import profile_for
from models.library import ModelStore
from tests.fixtures.tiny_hf import write_tiny_model

SETTINGS = LoadSettings(n_ctx=2048)


@pytest.fixture
def files(tmp_path: Path, starter_model: Path) -> list[Path]:
    """Two GGUF files (copies of the starter under other names) and a file that is no model."""
    folder = tmp_path / "models"
    folder.mkdir()
    copies = [folder / "a.Q4_1.gguf", folder / "b.Q4_1.gguf"]
    for copy in copies:
        os.link(starter_model, copy)  # the same bytes, another name: no 98 MB copy
    broken = folder / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\xff" * 64)
    return [*copies, broken]


def _listing(cache: PlanCache, planner: LoadPlanner, paths: list[Path], settings: LoadSettings = SETTINGS):
    cache.begin(planner, (str(p) for p in paths))
    return [cache.plan(str(p), settings) for p in paths]


def test_a_second_listing_plans_nothing_and_gives_the_same_plans(files: list[Path]):
    planner, cache = LoadPlanner(profile_for("RTX 4090", ram_gib=16)), PlanCache()
    first = _listing(cache, planner, files)
    assert cache.planned == 3 and first[0] is not None and first[2] is None  # the broken file: no plan
    assert _listing(cache, planner, files) == first
    assert cache.planned == 3  # the broken file's "no plan" is kept too: it has not changed


def test_a_changed_file_is_planned_again(files: list[Path], starter_model: Path):
    # files[0] gets a new modification time below: a link would change the installed starter model's
    # (shared by every test, and by the other pytest worker's listings), so it gets bytes of its own.
    own = files[0].with_suffix(".copy")
    shutil.copyfile(starter_model, own)
    os.replace(own, files[0])
    planner, cache = LoadPlanner(profile_for("RTX 4090", ram_gib=16)), PlanCache()
    before = _listing(cache, planner, files)
    broken = files[2]
    broken.unlink()
    shutil.copyfile(starter_model, broken)  # the same name, now a model: another size, time and inode
    after = _listing(cache, planner, files)
    # A listed file changed is a changed library (it may now be another model's draft): all planned again.
    assert cache.planned == 6
    assert after[:2] == before[:2] and after[2] is not None and after[2].fits
    st = files[0].stat()
    os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    cache.plan(str(files[0]), SETTINGS)  # within a listing too, a plan is of the file as it is now
    assert cache.planned == 7


def test_other_settings_are_planned_apart(files: list[Path]):
    planner, cache = LoadPlanner(profile_for("RTX 4090", ram_gib=16)), PlanCache()
    small = _listing(cache, planner, files[:1])
    large = _listing(cache, planner, files[:1], LoadSettings(n_ctx=8192))
    assert cache.planned == 2 and small[0].context == 2048 and large[0].context == 8192
    assert _listing(cache, planner, files[:1]) == small and cache.planned == 2


def test_a_model_added_to_the_library_plans_every_model_again(tmp_path: Path, files: list[Path], starter_model: Path):
    """Auto drafts with a smaller model of the library: a new model may change every plan."""
    store = ModelStore(tmp_path / "data", tmp_path / "hub")
    store.import_gguf(files[0])
    planner = LoadPlanner(profile_for(ram_gib=16), drafts=DraftFinder(lambda: library_ggufs(store)))
    cache = PlanCache()
    _listing(cache, planner, files[:1])
    _listing(cache, planner, files[:1])
    assert cache.planned == 1
    _listing(cache, planner, files[:2])  # the library has one more model
    assert cache.planned == 3
    (files[0].parent / "c.gguf").write_bytes(b"")  # the folder of a listed file changed (a shard, a projector)
    _listing(cache, planner, files[:2])
    assert cache.planned == 5


def test_another_machine_plans_every_model_again(files: list[Path]):
    cache = PlanCache()
    tight = LoadPlanner(profile_for(ram_gib=0.15))
    roomy = LoadPlanner(profile_for("RTX 4090", ram_gib=16))
    assert not _listing(cache, tight, files[:1])[0].fits
    assert _listing(cache, roomy, files[:1])[0].fits and cache.planned == 2


def test_a_model_folder_is_planned_again_when_a_file_in_it_changes(tmp_path: Path):
    pytest.importorskip("torch")
    folder = tmp_path / "tiny-llama"
    write_tiny_model(folder, "llama")
    planner, cache = LoadPlanner(profile_for(ram_gib=16)), PlanCache()
    _listing(cache, planner, [folder])
    _listing(cache, planner, [folder])
    assert cache.planned == 1
    config = folder / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 3'))
    st = config.stat()
    os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert _listing(cache, planner, [folder])[0].n_layers == 3 and cache.planned == 2


def test_a_path_that_cannot_be_read_is_planned_every_time(tmp_path: Path):
    planner, cache = LoadPlanner(profile_for(ram_gib=16)), PlanCache()
    gone = tmp_path / "gone.gguf"
    assert stamp_of(str(gone)) == ()
    _listing(cache, planner, [gone])
    _listing(cache, planner, [gone])
    assert cache.planned == 2


def test_plan_before_a_listing_is_refused():
    with pytest.raises(RuntimeError, match="before begin"):
        PlanCache().plan("/models/a.gguf", SETTINGS)

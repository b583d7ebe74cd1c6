"""The local library over a real cache folder: listing, imported files, delete, open folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from models.download.records import add_pending
from models.download.request import DownloadFile, DownloadRequest
from models.hub.cache import link_blob, write_ref
from models.library import ImportedModel, LocalFile, LocalRepo, LocalRevision, ModelStore, StoreError

C1, C2 = "1" * 40, "2" * 40


def _put(cache: Path, repo_id: str, commit: str, name: str, data: bytes, ref: str | None = "main") -> Path:
    """Lay a file out the way huggingface_hub does (another tool's download)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link_blob(blob, repo / "snapshots" / commit / name)
    if ref:
        write_ref(repo, ref, commit)
    return repo / "snapshots" / commit / name


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    cache = tmp_path / "hub"
    _put(cache, "org/a-GGUF", C1, "a.Q4_K_M.gguf", b"GGUF" + b"a" * 96)
    _put(cache, "org/a-GGUF", C1, "README.md", b"readme")
    _put(cache, "org/a-GGUF", C2, "a.Q4_K_M.gguf", b"GGUF" + b"a" * 96, ref=None)  # same blob
    _put(cache, "org/a-GGUF", C2, "a.Q8_0.gguf", b"GGUF" + b"b" * 196, ref=None)
    _put(cache, "other/b", C1, "model.safetensors", b"s" * 50)
    return cache


@pytest.fixture
def store(cache: Path, tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "data", cache)


def test_lists_repos_revisions_and_files(store):
    library = store.list()
    assert [r.repo_id for r in library.repos] == ["org/a-GGUF", "other/b"]
    a = library.repos[0]
    assert a.size == 100 + 6 + 200  # the shared blob once
    assert {r.commit for r in a.revisions} == {C1, C2}
    first = next(r for r in a.revisions if r.commit == C1)
    assert first.refs == ("main",) and first.complete
    assert [(f.path_in_repo, f.size, f.is_gguf) for f in first.files] == [
        ("README.md", 6, False), ("a.Q4_K_M.gguf", 100, True)]
    assert {f.path_in_repo for f in a.gguf_files} == {"a.Q4_K_M.gguf", "a.Q8_0.gguf"}
    assert library.total_size == 306 + 50 and not library.warnings


def test_a_pending_download_marks_its_revision_incomplete(store, cache):
    add_pending(cache, DownloadRequest("other/b", C1, (DownloadFile("model.safetensors", "http://x", 50, None,
                                                                    "f" * 40),)))
    b = store.list().repos[1]
    assert not b.complete and not b.revisions[0].complete


def test_imported_gguf_files_are_registered_not_copied(store, tmp_path):
    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF" + b"x" * 10)
    imported = store.import_gguf(model)
    assert imported == ImportedModel(model.resolve(), 14, True)
    store.import_gguf(model)  # once only
    library = store.list()
    assert library.imported == (imported,)
    assert library.total_size == 356 + 14
    assert store.find(str(model)) == imported
    assert store.open_folder_path(imported) == model.resolve().parent
    store.delete(imported)
    assert store.list().imported == () and model.exists()  # forgotten, not deleted


def test_import_refuses_what_is_not_gguf(store, tmp_path):
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    with pytest.raises(StoreError, match="not a GGUF"):
        store.import_gguf(notes)
    with pytest.raises(StoreError, match="cannot read"):
        store.import_gguf(tmp_path / "missing.gguf")


def test_a_missing_imported_file_is_listed_as_missing(store, tmp_path):
    model = tmp_path / "gone.gguf"
    model.write_bytes(b"GGUF")
    store.import_gguf(model)
    model.unlink()
    assert store.list().imported == (ImportedModel(model.resolve(), 0, False),)


def test_delete_a_file_keeps_a_blob_another_revision_uses(store, cache):
    a = store.find("org/a-GGUF")
    assert isinstance(a, LocalRepo)
    old = next(r for r in a.revisions if r.commit == C1)
    shared = next(f for f in old.files if f.path_in_repo == "a.Q4_K_M.gguf")
    store.delete(shared)
    assert not shared.path.exists() and shared.blob_path.exists()
    new = next(r for r in store.find("org/a-GGUF").revisions if r.commit == C2)
    q8 = next(f for f in new.files if f.path_in_repo == "a.Q8_0.gguf")
    assert store.find(str(q8.path)) == q8 and isinstance(q8, LocalFile)
    store.delete(q8)
    assert not q8.blob_path.exists()


def test_delete_a_revision_and_a_repo(store, cache):
    a = store.find("org/a-GGUF")
    old = next(r for r in a.revisions if r.commit == C1)
    assert isinstance(old, LocalRevision) and store.open_folder_path(old) == old.snapshot_dir
    store.delete(old)
    a = store.find("org/a-GGUF")
    assert [r.commit for r in a.revisions] == [C2]
    assert (a.revisions[0].snapshot_dir / "a.Q4_K_M.gguf").read_bytes().startswith(b"GGUF")
    assert store.open_folder_path(a) == a.revisions[0].snapshot_dir
    store.delete(a)
    assert [r.repo_id for r in store.list().repos] == ["other/b"]
    assert not a.repo_dir.exists()


def test_unknown_names_and_an_empty_cache(tmp_path):
    store = ModelStore(tmp_path / "data", tmp_path / "no-cache")
    assert store.list().repos == () and store.list().total_size == 0
    with pytest.raises(StoreError, match="no local model"):
        store.find("org/nothing")

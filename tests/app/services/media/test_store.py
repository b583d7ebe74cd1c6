"""The media store (issue 33): content-addressed beside the history, each file once, written whole or not at
all, checked on every read, and collected when no message uses it any more."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from app.services.media import store as store_module
from app.services.media.errors import MediaDamaged, MediaMissing, StoredMediaError
from app.services.media.intake import read_image, stored_image
from app.services.media.store import COLLECT_GRACE_S, STALE_TEMP_S, MediaStore, media_folder
from tests.app.services.media.images import red_square, save

PNG_A = b"\x89PNG\r\n\x1a\n first"
PNG_B = b"\x89PNG\r\n\x1a\n second"
JPEG_C = b"\xff\xd8\xff third"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _all_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def store(tmp_path: Path) -> MediaStore:
    return MediaStore.beside(tmp_path / "chats.sqlite3")


def test_the_media_folder_is_the_history_s_own(tmp_path: Path):
    assert media_folder(tmp_path / "chats.sqlite3") == tmp_path / "chats-media"
    assert media_folder(tmp_path / "work.sqlite3") == tmp_path / "work-media"
    assert MediaStore.beside(tmp_path / "chats.sqlite3").folder == tmp_path / "chats-media"


def test_a_put_is_kept_by_its_hash_and_read_back(store: MediaStore):
    stored = store.put(PNG_A, ".png")
    sha = _sha(PNG_A)
    assert stored.sha256 == sha and stored.added and stored.size == len(PNG_A)
    assert stored.path == store.folder / sha[:2] / f"{sha}.png"
    assert stored.path.read_bytes() == PNG_A
    assert store.path_of(sha) == stored.path
    assert store.read(sha) == PNG_A
    assert store.hashes() == {sha}
    assert stored.path.stat().st_mode & 0o077 == 0  # private, like the chats


def test_the_same_bytes_are_stored_once(store: MediaStore):
    first = store.put(PNG_A, ".png")
    again = store.put(PNG_A, ".png")
    assert not again.added and again.path == first.path
    store.put(PNG_B, ".png")
    assert _all_files(store.folder) == sorted(
        f"{_sha(d)[:2]}/{_sha(d)}.png" for d in (PNG_A, PNG_B))


def test_a_prepared_image_is_stored_and_read_back_as_the_same_image(tmp_path: Path, store: MediaStore):
    image = read_image(save(red_square(), tmp_path / "square.jpg", "JPEG"))
    stored = store.put(image.original, image.suffix)
    assert stored.path.suffix == ".jpg"
    again = stored_image(store, image.sha256, name="square.jpg")
    assert again == image


def test_a_write_cut_off_leaves_nothing_behind(store: MediaStore, monkeypatch: pytest.MonkeyPatch):
    store.put(PNG_A, ".png")  # the shard folders exist

    def fail(*args):
        raise OSError(28, "No space left on device")

    for step in ("fsync", "replace"):
        with monkeypatch.context() as patch:
            patch.setattr(os, step, fail)
            with pytest.raises(StoredMediaError, match="^Cannot store an image in .*: No space left on device$"):
                store.put(PNG_B, ".png")
        assert store.path_of(_sha(PNG_B)) is None
        assert _all_files(store.folder) == [f"{_sha(PNG_A)[:2]}/{_sha(PNG_A)}.png"]  # no temporary file left


def test_a_tampered_file_is_refused_on_read_and_a_put_repairs_it(store: MediaStore):
    stored = store.put(PNG_A, ".png")
    stored.path.write_bytes(PNG_B)
    with pytest.raises(MediaDamaged, match="no longer has the bytes it was stored with"):
        store.read(stored.sha256)
    repaired = store.put(PNG_A, ".png")
    assert repaired.added and store.read(stored.sha256) == PNG_A


def test_a_missing_file_a_fifo_and_a_bad_hash_are_refused(store: MediaStore):
    sha = _sha(PNG_A)
    with pytest.raises(MediaMissing, match=f"^The image {sha[:12]}… is not in "):
        store.read(sha)
    for bad in ("../../etc/passwd", sha.upper(), sha[:-1], ""):
        with pytest.raises(ValueError, match="not a sha256"):
            store.read(bad)
    if hasattr(os, "mkfifo"):
        fifo = store.folder / sha[:2] / f"{sha}.png"
        fifo.parent.mkdir(parents=True)
        os.mkfifo(fifo)
        outcome: list[BaseException] = []
        worker = threading.Thread(target=lambda: _catch(outcome, store.read, sha), daemon=True)
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive(), "reading a FIFO blocked"
        assert isinstance(outcome[0], MediaDamaged) and "FIFO" in str(outcome[0])


def _catch(outcome: list[BaseException], call, *args) -> None:
    try:
        call(*args)
    except BaseException as exc:  # noqa: BLE001
        outcome.append(exc)


def test_only_known_suffixes_and_sizes_are_stored(store: MediaStore):
    for suffix in (".svg", "/../x.png", ""):
        with pytest.raises(ValueError):
            store.put(PNG_A, suffix)
    with pytest.raises(ValueError, match="up to 10 bytes"):
        MediaStore(store.folder, max_bytes=10).put(PNG_A, ".png")
    assert not store.folder.exists()


def test_collect_removes_only_the_unused_files(store: MediaStore):
    a, b, c = (store.put(data, suffix) for data, suffix in ((PNG_A, ".png"), (PNG_B, ".png"), (JPEG_C, ".jpg")))
    collected = store.collect({a.sha256}, grace_s=0)
    assert sorted(collected.removed) == sorted([b.sha256, c.sha256])
    assert collected.freed_bytes == len(PNG_B) + len(JPEG_C) and collected.spared == ()
    assert store.hashes() == {a.sha256} and store.read(a.sha256) == PNG_A
    assert _all_files(store.folder) == [f"{a.sha256[:2]}/{a.sha256}.png"]
    assert sorted(p.name for p in store.folder.iterdir()) == [a.sha256[:2]]  # emptied shards go too
    assert store.collect(set(), grace_s=0).removed == (a.sha256,)
    assert store.hashes() == set()


def test_collect_spares_a_file_put_within_the_grace_period(store: MediaStore):
    stored = store.put(PNG_A, ".png")
    collected = store.collect(set())
    assert collected.removed == () and collected.spared == (stored.sha256,)
    assert store.read(stored.sha256) == PNG_A
    later = time.time() + COLLECT_GRACE_S + 1
    assert store.collect(set(), now=later).removed == (stored.sha256,)


def test_putting_stored_bytes_again_makes_them_young_again(store: MediaStore):
    stored = store.put(PNG_A, ".png")
    _age(stored.path, COLLECT_GRACE_S * 2)
    store.put(PNG_A, ".png")
    assert store.collect(set()).spared == (stored.sha256,)


def test_a_put_during_a_collect_is_kept(store: MediaStore, monkeypatch: pytest.MonkeyPatch):
    stored = store.put(PNG_A, ".png")
    _age(stored.path, COLLECT_GRACE_S * 2)
    real_replace = os.replace

    def put_first(source, target):  # another process puts the same bytes just before the rename aside
        monkeypatch.setattr(store_module.os, "replace", real_replace)
        store.put(PNG_A, ".png")
        real_replace(source, target)

    monkeypatch.setattr(store_module.os, "replace", put_first)
    assert store.collect(set()).spared == (stored.sha256,)
    assert store.read(stored.sha256) == PNG_A


def test_collect_sweeps_leftover_temporary_files_but_not_young_ones(store: MediaStore):
    stored = store.put(PNG_A, ".png")
    shard = stored.path.parent
    old = shard / f".{stored.path.name}.abc123.part"
    young = shard / f".{stored.path.name}.def456.part"
    old.write_bytes(b"half")
    young.write_bytes(b"writing")
    _age(old, STALE_TEMP_S + 60)
    store.collect({stored.sha256})
    assert not old.exists() and young.exists() and stored.path.exists()


def test_remove_takes_a_file_now(store: MediaStore):
    stored = store.put(PNG_A, ".png")
    assert store.remove(stored.sha256) and not store.remove(stored.sha256)
    assert store.hashes() == set() and not store.folder.joinpath(stored.sha256[:2]).exists()


def test_an_empty_or_absent_store_has_nothing(tmp_path: Path):
    store = MediaStore(tmp_path / "nowhere")
    assert store.hashes() == set()
    assert store.collect(set(), grace_s=0).removed == ()
    assert not (tmp_path / "nowhere").exists()

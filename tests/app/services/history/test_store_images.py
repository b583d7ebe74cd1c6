"""The images messages carry (issue 33), in a real history file beside a real media store: stored once by
hash, loaded in order with their messages, kept by edits and branch copies, and collected when the last
chat naming them goes (not before, and not within the store's grace period)."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from app.services.history.recovery import recover_history
from app.services.history.store import (
    SCHEMA_VERSION,
    ChatStore,
    HistoryProblem,
    ImageRef,
    StoreDamagedError,
    StoreUnwritableError,
)
from app.services.media.intake import PreparedImage, read_image
from tests.app.services.history.history_files import Medium, chats_of, old_history
from tests.app.services.media.images import red_square, save


@pytest.fixture
def photos(tmp_path) -> list[PreparedImage]:
    """A PNG and a JPEG written by Pillow, read by the intake."""
    png = save(red_square(64, 48), tmp_path / "square.png", "PNG")
    jpeg = save(red_square(40, 80).rotate(90, expand=True), tmp_path / "photo.jpg", "JPEG", quality=90)
    return [read_image(png), read_image(jpeg)]


@pytest.fixture
def store(tmp_path) -> ChatStore:
    store = ChatStore(tmp_path / "history" / "chats.sqlite3")
    yield store
    store.close()


def test_a_schema_7_file_is_upgraded_and_its_messages_carry_no_images(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 7)
    store = ChatStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 8
    assert chats_of(store) == made
    chat = store.list_conversations()[-1]
    assert [m.images for m in store.list_messages(chat.id)] == [(), ()]
    columns = [row[1] for row in store._db.execute("PRAGMA table_info(message_media)")]
    assert columns == ["message_id", "position", "sha256", "format", "name", "width", "height", "kind", "seconds"]
    store.close()


def test_a_message_with_two_images_is_stored_and_loaded_with_them_in_order(store, photos):
    chat = store.create_conversation("Look")
    added = store.add_message(chat.id, "user", "What is in these?", images=photos)
    square, photo = (ImageRef.of(p) for p in photos)
    assert added.images == (square, photo)
    assert square == ImageRef(photos[0].sha256, "PNG", "square.png", 64, 48)
    assert (photo.format, photo.width, photo.height) == ("JPEG", 80, 40)
    reply = store.add_message(chat.id, "assistant", "A red square, twice.")
    for loaded in (store.list_messages(chat.id), store.all_messages(chat.id)):
        assert [m.images for m in loaded] == [(square, photo), ()]
    assert store.get_message(added.id).images == (square, photo)
    assert store.get_message(reply.id).images == ()
    # The originals are in the media store beside the history, byte for byte.
    assert store.media.folder == store.path.parent / "chats-media"
    assert [store.media.read(ref.sha256) for ref in added.images] == [p.original for p in photos]
    assert store.media.path_of(square.sha256).suffix == ".png"


def test_an_image_only_message_and_a_reopened_history_keep_their_images(store, photos):
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "", images=photos[1:])
    path = store.path
    store.close()
    again = ChatStore(path)
    try:
        assert [m.images[0].name for m in again.list_messages(chat.id)] == ["photo.jpg"]
    finally:
        again.close()


def test_the_same_image_in_two_chats_is_stored_once_and_goes_with_the_last_of_them(store, photos):
    store.media_grace_s = 0  # no other process puts files here: collected as soon as unnamed
    first, second = store.create_conversation("One"), store.create_conversation("Two")
    store.add_message(first.id, "user", "this", images=photos[:1])
    store.add_message(second.id, "user", "this again", images=[photos[0], photos[1]])
    assert store.media.hashes() == {photos[0].sha256, photos[1].sha256}
    store.delete_conversation(second.id)  # its JPEG goes; the PNG is still named by the first chat
    assert store.media.hashes() == {photos[0].sha256}
    store.delete_conversation(first.id)
    assert store.media.hashes() == set()
    assert not any(store.media.folder.iterdir())  # emptied shards are removed too


def test_a_deleted_chat_keeps_its_files_for_the_grace_period(store, photos):
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "x", images=photos)
    store.delete_conversation(chat.id)  # just put: another process may be about to name them
    assert store.media.hashes() == {p.sha256 for p in photos}
    collected = store.collect_media(grace_s=0)
    assert set(collected.removed) == {p.sha256 for p in photos}
    assert store.media.hashes() == set()


def test_deleting_messages_collects_the_images_only_they_carried(store, photos):
    store.media_grace_s = 0
    chat = store.create_conversation()
    keep = store.add_message(chat.id, "user", "first", images=photos[:1])
    store.add_message(chat.id, "assistant", "ok")
    later = store.add_message(chat.id, "user", "second", images=photos)
    store.add_message(chat.id, "assistant", "ok")
    store.delete_message(later.id)  # and the reply under it
    assert store.media.hashes() == {photos[0].sha256}
    assert store.get_message(keep.id).images == (ImageRef.of(photos[0]),)
    empty = store.add_message(chat.id, "assistant", "", state="streaming")
    store.delete_message(empty.id)  # named nothing: the store is not swept
    assert store.media.hashes() == {photos[0].sha256}


def test_an_edit_keeps_or_replaces_the_images_and_a_branch_copy_names_them_again(store, photos):
    store.media_grace_s = 0
    chat = store.create_conversation("Edits")
    old = store.add_message(chat.id, "user", "what is this?", images=photos)
    kept = store.add_message(chat.id, "user", "what is this, exactly?", parent_id=old.parent_id, images=old.images)
    replaced = store.add_message(chat.id, "user", "and this?", parent_id=old.parent_id, images=photos[1:])
    assert store.get_message(kept.id).images == old.images
    assert store.get_message(replaced.id).images == (ImageRef.of(photos[1]),)
    copy = store.copy_branch(kept.id)
    assert [m.images for m in store.list_messages(copy.id)] == [old.images]
    store.delete_conversation(chat.id)  # the copy still names both files
    assert store.media.hashes() == {p.sha256 for p in photos}
    store.delete_conversation(copy.id)
    assert store.media.hashes() == set()


def test_a_read_only_history_refuses_a_message_with_images_and_stores_no_file(tmp_path, photos):
    path = tmp_path / "chats.sqlite3"
    ChatStore(path).close()
    store = ChatStore(path, connect=Medium(read_only=True).connect)
    try:
        with pytest.raises(StoreUnwritableError):
            store.add_message(1, "user", "x", images=photos)
        assert store.media.hashes() == set()
    finally:
        store.close()


def test_a_recovered_history_keeps_the_images_of_its_messages(tmp_path, photos):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    chat = store.create_conversation()
    message = store.add_message(chat.id, "user", "x", images=photos)
    store.close()
    with closing(sqlite3.connect(path)) as db:  # a row naming a message that is gone (a lost page)
        db.execute("INSERT INTO message_media (message_id, position, sha256, format, name, width, height)"
                   " VALUES (999, 0, ?, 'PNG', 'lost.png', 1, 1)", (photos[0].sha256,))
        db.commit()
    recover_history(path)
    store = ChatStore(path)
    try:
        assert store.get_message(message.id).images == message.images
        assert store._db.execute("SELECT count(*) FROM message_media").fetchone()[0] == 2
    finally:
        store.close()


def test_a_stand_in_for_a_damaged_history_never_collects_its_files(store, photos):
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "x", images=photos)
    stand_in = ChatStore.unavailable(StoreDamagedError(HistoryProblem("damaged", store.path, "malformed")))
    assert stand_in.list_conversations() == [] and stand_in.media.folder == store.media.folder
    assert stand_in.collect_media(grace_s=0) is None  # it names nothing: every file would look unused
    assert store.media.hashes() == {p.sha256 for p in photos}
    stand_in.close()

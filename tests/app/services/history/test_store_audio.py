"""The audio clips messages carry (issue 33), in a real history file beside a real media store: schema step 9
(a kind and a length on each media row), clips stored once by hash after the message's images, kept by edits,
branch copies and recovery, and collected with the last chat that names them."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import numpy as np
import pytest

from app.services.history.recovery import recover_history
from app.services.history.store import SCHEMA_VERSION, AudioRef, ChatStore, ImageRef
from app.services.media.intake import PreparedAudio, PreparedImage, audio_from_bytes, read_image
from tests.app.services.history.history_files import chats_of, old_history
from tests.app.services.media.images import red_square, save
from tests.app.services.media.sounds import pcm_wav, tone


def clip(name: str, seconds: float, hz: float = 440.0, rate: int = 22_050) -> PreparedAudio:
    """A mono 16-bit WAV of a sine, read by the intake at 16 kHz."""
    return audio_from_bytes(pcm_wav(tone(seconds, rate, hz), rate, 16), sample_rate=16_000, name=name)


@pytest.fixture
def clips() -> list[PreparedAudio]:
    return [clip("question.wav", 1.5), clip("stereo.wav", 0.5, hz=660.0)]


@pytest.fixture
def photo(tmp_path) -> PreparedImage:
    return read_image(save(red_square(32, 32), tmp_path / "square.png", "PNG"))


@pytest.fixture
def store(tmp_path) -> ChatStore:
    store = ChatStore(tmp_path / "history" / "chats.sqlite3")
    yield store
    store.close()


def test_a_schema_8_file_is_upgraded_its_media_rows_are_images(tmp_path, photo):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 8)
    with closing(sqlite3.connect(path)) as db:  # an image row as schema 8 wrote it
        db.execute("INSERT INTO message_media VALUES (1, 0, ?, 'PNG', 'square.png', 32, 32)", (photo.sha256,))
        db.commit()
    store = ChatStore(path)
    try:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 10
        assert chats_of(store) == made
        message = store.get_message(1)
        assert message.images == (ImageRef(photo.sha256, "PNG", "square.png", 32, 32),) and message.clips == ()
        assert store._db.execute("SELECT kind, seconds FROM message_media").fetchall() == [("image", None)]
    finally:
        store.close()


def test_clips_are_stored_after_the_images_and_loaded_in_order(store, clips, photo):
    chat = store.create_conversation("Listen")
    added = store.add_message(chat.id, "user", "What do you hear?", images=[photo], clips=clips)
    question, short = (AudioRef.of(c) for c in clips)
    assert added.clips == (question, short) and added.images == (ImageRef.of(photo),)
    assert question == AudioRef(clips[0].sha256, "WAV", "question.wav", pytest.approx(1.5, abs=1e-3))
    assert question.suffix == ".wav"
    store.add_message(chat.id, "assistant", "A tone.")
    for loaded in (store.list_messages(chat.id), store.all_messages(chat.id)):
        assert [(m.images, m.clips) for m in loaded] == [((ImageRef.of(photo),), (question, short)), ((), ())]
    assert store.get_message(added.id).clips == (question, short)
    rows = store._db.execute("SELECT position, kind, name, width, height, seconds FROM message_media"
                             " ORDER BY position").fetchall()
    assert [r[:3] for r in rows] == [(0, "image", "square.png"), (1, "audio", "question.wav"),
                                     (2, "audio", "stereo.wav")]
    assert rows[1][3:5] == (0, 0) and rows[1][5] == pytest.approx(1.5, abs=1e-3)
    # The original WAV bytes are in the media store, as .wav, byte for byte.
    assert [store.media.read(ref.sha256) for ref in added.clips] == [c.original for c in clips]
    assert store.media.path_of(question.sha256).suffix == ".wav"


def test_a_clip_only_message_survives_a_reopened_history(store, clips):
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "", clips=clips[1:])
    path = store.path
    store.close()
    again = ChatStore(path)
    try:
        (message,) = again.list_messages(chat.id)
        assert [c.name for c in message.clips] == ["stereo.wav"] and message.images == ()
    finally:
        again.close()


def test_clips_go_with_the_last_chat_that_names_them(store, clips):
    store.media_grace_s = 0
    first, second = store.create_conversation("One"), store.create_conversation("Two")
    store.add_message(first.id, "user", "this", clips=clips[:1])
    store.add_message(second.id, "user", "this again", clips=clips)
    assert store.media.hashes() == {c.sha256 for c in clips}
    store.delete_conversation(second.id)
    assert store.media.hashes() == {clips[0].sha256}
    store.delete_conversation(first.id)
    assert store.media.hashes() == set()


def test_an_edit_keeps_the_clips_and_a_branch_copy_names_them_again(store, clips):
    store.media_grace_s = 0
    chat = store.create_conversation("Edits")
    old = store.add_message(chat.id, "user", "what is this?", clips=clips)
    kept = store.add_message(chat.id, "user", "what is this, exactly?", parent_id=old.parent_id, clips=old.clips)
    assert store.get_message(kept.id).clips == old.clips
    copy = store.copy_branch(kept.id)
    assert [m.clips for m in store.list_messages(copy.id)] == [old.clips]
    store.delete_conversation(chat.id)
    assert store.media.hashes() == {c.sha256 for c in clips}
    store.delete_conversation(copy.id)
    assert store.media.hashes() == set()


def test_recovery_keeps_clips_and_drops_rows_of_no_kind_it_knows(tmp_path, clips):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    chat = store.create_conversation()
    message = store.add_message(chat.id, "user", "x", clips=clips)
    store.close()
    with closing(sqlite3.connect(path)) as db:
        db.execute("INSERT INTO message_media VALUES (?, 7, ?, 'WAV', 'odd.wav', 0, 0, 'video', NULL)",
                   (message.id, clips[0].sha256))
        db.execute("INSERT INTO message_media VALUES (?, 8, ?, 'WAV', 'long.wav', 0, 0, 'audio', 'ten minutes')",
                   (message.id, clips[0].sha256))
        db.commit()
    recover_history(path)
    store = ChatStore(path)
    try:
        assert store.get_message(message.id).clips == message.clips
    finally:
        store.close()


def test_a_row_of_an_unknown_kind_is_left_out_of_its_message_alone(store, clips, caplog):
    chat = store.create_conversation()
    message = store.add_message(chat.id, "user", "x", clips=clips[:1])
    store._db.execute("INSERT INTO message_media VALUES (?, 5, ?, 'MP4', 'film.mp4', 1, 1, 'video', 3.0)",
                      (message.id, "0" * 64))
    loaded = store.get_message(message.id)
    assert loaded.clips == message.clips and loaded.images == () and loaded.content == "x"
    assert "unknown kind 'video'" in caplog.text


def test_clip_lengths_are_kept_to_the_sample(store):
    chat = store.create_conversation()
    exact = audio_from_bytes(pcm_wav(np.zeros(16_001), 16_000, 16), sample_rate=16_000, name="one.wav")
    store.add_message(chat.id, "user", "", clips=[exact])
    (message,) = store.list_messages(chat.id)
    assert message.clips[0].seconds == 16_001 / 16_000

"""A user message's stored clips reach the engine as its media, after its images, decoded once each at the rate
the model hears; a stored file that is missing or damaged costs that clip alone, named, never the chat."""

from __future__ import annotations

import pytest

from app.chat.engine_history import UnavailableMedia, engine_messages
from app.chat.stored_clips import StoredClips
from app.chat.stored_images import StoredImages
from app.services.history.store import ChatStore
from app.services.media.intake import audio_from_bytes, read_image
from tests.app.services.media.images import red_square, save
from tests.app.services.media.sounds import pcm_wav, tone


@pytest.fixture
def store(tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    yield store
    store.close()


def wav(hz: float, seconds: float = 1.0, rate: int = 48_000) -> bytes:
    return pcm_wav(tone(seconds, rate, hz), rate, 16)


def test_clips_follow_the_images_each_decoded_once_at_the_rate_asked(store, tmp_path):
    photo = read_image(save(red_square(20, 20), tmp_path / "square.png", "PNG"))
    clips = [audio_from_bytes(wav(440.0), sample_rate=16_000, name="a.wav"),
             audio_from_bytes(wav(660.0), sample_rate=16_000, name="b.wav")]
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "Look and listen.", images=[photo], clips=clips)
    store.add_message(chat.id, "assistant", "Red, and two tones.")
    store.add_message(chat.id, "user", "", clips=clips[1:])
    loader = StoredClips(store.media, sample_rate=16_000)
    history = engine_messages(store.list_messages(chat.id), "", StoredImages(store.media), None, loader)
    assert [[m.kind for m in turn.media] for turn in history] == [["image", "audio", "audio"], [], ["audio"]]
    assert history[0].media[1:] == tuple(c.as_media() for c in clips)
    assert history[2].media[0] is history[0].media[2]  # the same clip again: decoded once
    assert len(loader) == 2 and loader.cached_bytes == 2 * 16_000 * 4
    # Another model hears at 24 kHz: decoded again for it, never sent at the old rate.
    loader.sample_rate = 24_000
    again = engine_messages(store.list_messages(chat.id), "", None, None, loader)
    assert [m.sample_rate for m in again[0].media] == [24_000, 24_000]
    assert len(again[0].media[0].data) == 24_000 * 4
    # A model that neither sees nor hears is sent the text alone.
    assert [t.media for t in engine_messages(store.list_messages(chat.id), "")] == [(), ()]


def test_a_damaged_stored_clip_is_named_and_the_message_goes_with_the_rest(store):
    kept = audio_from_bytes(wav(440.0), sample_rate=16_000, name="kept.wav")
    lost = audio_from_bytes(wav(880.0), sample_rate=16_000, name="lost.wav")
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "Two clips.", clips=[kept, lost])
    stored = store.media.path_of(lost.sha256)
    stored.write_bytes(stored.read_bytes()[:-40] + b"\1" * 40)
    unavailable: list[UnavailableMedia] = []
    (turn,) = engine_messages(store.list_messages(chat.id), "", None, unavailable, StoredClips(store.media))
    assert turn.content == "Two clips." and [m.id for m in turn.media] == [kept.as_media().id]
    (problem,) = unavailable
    assert problem.ref.name == "lost.wav" and str(problem).startswith("lost.wav: ")

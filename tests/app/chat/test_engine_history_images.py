"""A user message's stored images reach the engine as its media, in order, decoded once each; a stored file
that is missing or damaged costs that image alone, named, never the chat."""

from __future__ import annotations

import pytest

from app.chat.engine_history import UnavailableMedia, engine_messages
from app.chat.stored_images import StoredImages
from app.services.history.store import ChatStore
from app.services.media.intake import PreparedImage, read_image
from tests.app.services.media.images import red_square, save


@pytest.fixture
def photos(tmp_path) -> list[PreparedImage]:
    return [read_image(save(red_square(64, 48), tmp_path / "square.png", "PNG")),
            read_image(save(red_square(30, 20, side=8), tmp_path / "photo.jpg", "JPEG", quality=90))]


@pytest.fixture
def store(tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    yield store
    store.close()


def chat_with_images(store: ChatStore, photos: list[PreparedImage]) -> int:
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "What are these?", images=photos)
    store.add_message(chat.id, "assistant", "Two red squares.")
    store.add_message(chat.id, "user", "", images=photos[:1])  # an image alone is a message
    return chat.id


def test_user_messages_carry_their_images_in_order_each_decoded_once(store, photos):
    cid = chat_with_images(store, photos)
    images = StoredImages(store.media)
    history = engine_messages(store.list_messages(cid), "Be brief.", images)
    assert [(m.role, m.content, len(m.media)) for m in history] == [
        ("system", "Be brief.", 0), ("user", "What are these?", 2), ("assistant", "Two red squares.", 0), ("user", "", 1)]
    square, photo = (p.as_media() for p in photos)
    assert history[1].media == (square, photo)
    assert history[3].media[0] is history[1].media[0]  # the same image again: decoded once, from the cache
    assert (square.width, square.height, len(square.data)) == (64, 48, 64 * 48 * 3)
    assert len(images) == 2 and images.cached_bytes == len(square.data) + len(photo.data)
    again = engine_messages(store.list_messages(cid), "Be brief.", images)  # the next turn decodes nothing
    assert again[1].media[1] is history[1].media[1]


def test_without_a_loader_no_media_is_sent_and_an_image_alone_is_left_out(store, photos):
    cid = chat_with_images(store, photos)
    history = engine_messages(store.list_messages(cid), "")
    assert [(m.content, m.media) for m in history] == [("What are these?", ()), ("Two red squares.", ())]


def test_a_damaged_stored_image_is_named_and_the_message_goes_with_the_rest(store, photos):
    cid = chat_with_images(store, photos)
    stored = store.media.path_of(photos[1].sha256)
    stored.write_bytes(stored.read_bytes()[:-40] + b"\0" * 40)  # damaged on disk
    unavailable: list[UnavailableMedia] = []
    history = engine_messages(store.list_messages(cid), "", StoredImages(store.media), unavailable)
    assert [(m.content, len(m.media)) for m in history] == [("What are these?", 1), ("Two red squares.", 0), ("", 1)]
    assert history[0].media == (photos[0].as_media(),)
    [lost] = unavailable
    assert lost.ref.name == "photo.jpg" and lost.ref.sha256 == photos[1].sha256
    assert str(lost).startswith("photo.jpg: ") and "no longer has the bytes it was stored with" in str(lost)
    assert lost.message_id == store.list_messages(cid)[0].id


def test_a_missing_stored_image_is_named_and_an_image_alone_message_goes_without_it(store, photos):
    cid = chat_with_images(store, photos)
    store.media.remove(photos[0].sha256)
    unavailable: list[UnavailableMedia] = []
    history = engine_messages(store.list_messages(cid), "", StoredImages(store.media), unavailable)
    assert [(m.content, len(m.media)) for m in history] == [("What are these?", 1), ("Two red squares.", 0)]
    assert [u.ref.name for u in unavailable] == ["square.png", "square.png"]
    assert "is not in" in unavailable[0].reason


def test_the_cache_keeps_the_most_recently_sent_within_its_bytes(store, photos):
    square, photo = photos
    images = StoredImages(store.media, max_bytes=len(square.rgb) + 10)
    chat = store.create_conversation()
    refs = store.add_message(chat.id, "user", "x", images=photos).images
    images(refs[1])
    images(refs[0])  # the square does not fit beside the photo: the photo goes
    assert len(images) == 1 and images(refs[0]) is images(refs[0])
    small = StoredImages(store.media, max_bytes=10)  # nothing fits: decoded each time, never kept
    assert small(refs[0]) == square.as_media() and len(small) == 0

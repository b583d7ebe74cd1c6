"""A chat's images on their way to the model: kept in the history, sent with every turn to a model that sees
(its projector found beside it), left out, with a notice, for one that does not or where a file is gone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PIL import Image

from app.chat.session import ChatSession
from app.chat.stored_images import StoredImages
from app.services.history.store import ChatStore
from app.services.media.intake import read_image
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from tests.app.chat.conftest import FIXED, Chat
from tests.fixtures.fake_engine import FakeEngine, HandTimer, Recorder
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


def picture(path: Path, colour: str) -> Path:
    Image.new("RGB", (90, 60), colour).save(path)
    return path


def vision_chat(tmp_path: Path, starter_model: Path, with_projector: bool = True) -> Chat:
    """A chat whose model is the starter model in a folder of its own, with a projector beside it."""
    folder = tmp_path / "model"
    folder.mkdir()
    model = folder / starter_model.name
    model.symlink_to(starter_model)
    if with_projector:
        write_tiny_projector(folder / "mmproj-F16.gguf", TinyProjectorSpec(projector_type="gemma3"))
    db = tmp_path / "chats.sqlite3"
    store = ChatStore(db)
    engine, heard, timers = FakeEngine(), Recorder(), []
    session = ChatSession(store, engine, LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path), str(model),
                          heard, lambda callback: timers.append(HandTimer(callback)) or timers[-1])
    engine.handle = session.handle
    session.open_conversation(store.create_conversation("New chat", FIXED).id)
    chat = Chat(session, engine, heard, timers, store, db)
    chat.started()
    return chat


def finish(chat: Chat, text: str) -> int:
    chat.engine.pump()
    request_id = chat.engine.last_request
    chat.engine.finish(request_id, text)
    chat.engine.pump()
    return request_id


def test_images_go_with_the_message_and_every_later_turn(tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model)
    try:
        assert chat.engine.loads[-1].mmproj.endswith("mmproj-F16.gguf")  # found beside the model
        red, blue = read_image(picture(tmp_path / "red.png", "red")), read_image(picture(tmp_path / "blue.jpg", "blue"))
        assert chat.session.send("What differs?", [red, blue])
        first = finish(chat, "The colour.")
        (sent,) = [m for m in chat.engine.prompts[first] if m.role == "user"]
        assert [m.id for m in sent.media] == [red.as_media().id, blue.as_media().id]
        assert (sent.media[0].width, sent.media[0].height) == (90, 60) and sent.media[0].data == red.rgb
        assert chat.session.send("And now?")
        second = finish(chat, "Still the colour.")
        users = [m for m in chat.engine.prompts[second] if m.role == "user"]
        assert [len(m.media) for m in users] == [2, 0]  # the first message's images, again, from the history
        assert users[0].media[1].data == blue.rgb
        stored = [m for m in chat.store.list_messages(chat.session.current.id) if m.role == "user"]
        assert [i.name for i in stored[0].images] == ["red.png", "blue.jpg"]
    finally:
        chat.store.close()


def test_a_message_of_images_alone_is_sent_and_names_the_chat(tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model)
    try:
        assert chat.session.send("", [read_image(picture(tmp_path / "sunset.png", "orange"))])
        request_id = finish(chat, "A sunset.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert sent.content == "" and len(sent.media) == 1
        assert chat.session.current.title == "sunset.png"
        assert not chat.session.send("")  # nothing at all: nothing sent
    finally:
        chat.store.close()


def test_a_model_that_cannot_see_gets_the_text_and_the_user_is_told(tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model, with_projector=False)
    try:
        assert chat.engine.loads[-1].mmproj is None
        assert chat.session.send("What is this?", [read_image(picture(tmp_path / "red.png", "red"))])
        request_id = finish(chat, "I cannot see it.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert sent.content == "What is this?" and sent.media == ()
        assert any("cannot see images" in n and "1 image " in n for (n,) in chat.heard.of("notice"))
    finally:
        chat.store.close()


def test_a_stored_image_gone_from_disk_costs_that_image_alone(tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model)
    try:
        kept, lost = read_image(picture(tmp_path / "kept.png", "green")), read_image(picture(tmp_path / "lost.png", "black"))
        assert chat.session.send("Two pictures.", [kept, lost])
        finish(chat, "Two.")
        chat.store.media.path_of(lost.sha256).unlink()
        chat.session.replies.images = StoredImages(chat.store.media)  # as after a restart: nothing decoded yet
        assert chat.session.send("Again?")
        request_id = finish(chat, "One.")
        first_user = next(m for m in chat.engine.prompts[request_id] if m.role == "user")
        assert [m.id for m in first_user.media] == [kept.as_media().id]
        assert any(n.startswith("Sent without lost.png") for (n,) in chat.heard.of("notice"))
        assert chat.session.current is not None  # the chat is there, its text and its other image
    finally:
        chat.store.close()


def test_images_that_outgrow_the_context_hold_the_message_back_and_go_with_it_after_the_reload(
        tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model)
    try:
        settings = chat.session.current.settings
        chat.session.update_settings(replace(settings, max_tokens=64, load=replace(settings.load, n_ctx=256)))
        assert chat.session.model.image_tokens is not None  # the loaded projector's count
        # the tiny gemma3 projector: 16 positions an image, and its markers counted high
        per_image = chat.session.model.image_tokens(90, 60)
        assert per_image >= 16
        two = [read_image(picture(tmp_path / f"p{i}.png", "red")) for i in range(2)]
        many = two * 4
        assert chat.session.send("What are these?", two)  # fits
        finish(chat, "Two red ones.")
        assert chat.engine.loads[-1].n_ctx == 256
        assert not chat.session.send("And these?", many)
        (short,) = chat.heard.last("context_outgrown")
        assert short.needed > 256 and short.images == tuple(many)
        held = len(chat.store.list_messages(chat.session.current.id))
        assert held == 2  # nothing was added
        assert chat.session.send_with_larger_context(short)
        chat.engine.pump()
        assert chat.engine.loads[-1].n_ctx == short.max_context
        sent = chat.engine.prompts[chat.engine.last_request][-1]
        assert sent.content == "And these?" and len(sent.media) == len(many)
    finally:
        chat.store.close()

"""Versions and branches through the session (no Qt): regenerate keeps the old reply, editing any of your
messages starts a branch, versions switch, a branch becomes a new chat, a search opens its hit's branch,
folders and pins."""

from __future__ import annotations

from app.chat.session import BUSY_HINT
from app.services.media.intake import read_image
from tests.app.services.media.images import red_square, save


def _answer(chat, text: str) -> None:
    """Stream and finish the reply the session just asked for."""
    chat.engine.pump()
    request_id = chat.engine.last_request
    chat.engine.stream(request_id, text)
    chat.engine.finish(request_id, text)
    chat.engine.pump()


def _shown(chat) -> list[str]:
    return [m.content for m in chat.store.list_messages(chat.session.current.id)]


def test_regenerate_keeps_the_old_reply_as_a_version(chat):
    chat.started()
    chat.reply("Name a colour.", "Blue.")
    assert chat.session.regenerate()
    _answer(chat, "Red.")
    assert _shown(chat) == ["Name a colour.", "Red."]
    # The model was asked without the old reply.
    assert [m.content for m in chat.engine.prompts[chat.engine.last_request]][-1] == "Name a colour."
    versions = chat.heard.last("versions_changed")[0]
    blue, red = (m for m in chat.store.all_messages(chat.session.current.id) if m.role == "assistant")
    assert (versions[red.id].index, versions[red.id].count) == (2, 2) and versions[red.id].ids == (blue.id, red.id)
    assert chat.session.show_version(blue.id)
    assert _shown(chat) == ["Name a colour.", "Blue."]
    assert [m.content for m in chat.heard.last("conversation_opened")[1]] == ["Name a colour.", "Blue."]


def test_editing_an_earlier_message_branches_there_and_keeps_the_rest(chat):
    chat.started()
    chat.reply("Capital of France?", "Paris.")
    chat.reply("And of Italy?", "Rome.")
    first = next(m for m in chat.store.list_messages(chat.session.current.id) if m.content == "Capital of France?")
    assert chat.session.edit_message(first.id, "Capital of Spain?")
    sent = chat.engine.prompts[chat.engine.last_request]
    assert [m.content for m in sent if m.role != "system"] == ["Capital of Spain?"]  # nothing after it was sent
    _answer(chat, "Madrid.")
    assert _shown(chat) == ["Capital of Spain?", "Madrid."]
    assert chat.session.show_version(first.id)  # the first version, with what followed it
    assert _shown(chat) == ["Capital of France?", "Paris.", "And of Italy?", "Rome."]
    assert chat.store.message_count(chat.session.current.id) == 6


def test_a_message_that_is_not_yours_or_not_shown_cannot_be_edited(chat):
    chat.started()
    chat.reply("Hi", "Hello")
    reply = next(m for m in chat.store.list_messages(chat.session.current.id) if m.role == "assistant")
    assert not chat.session.edit_message(reply.id, "Changed")
    assert not chat.session.edit_message(99_999, "Changed")
    assert not chat.session.edit_message(reply.parent_id, "   ")
    assert _shown(chat) == ["Hi", "Hello"]


def test_versions_do_not_switch_while_a_reply_is_written(chat):
    chat.started()
    chat.reply("Hi", "Hello")
    hello = chat.store.list_messages(chat.session.current.id)[-1]
    assert chat.session.regenerate()
    chat.engine.pump()
    assert not chat.session.show_version(hello.id)
    assert chat.heard.last("notice") == (BUSY_HINT,)


def test_a_branch_becomes_a_new_chat(chat):
    chat.started()
    chat.reply("Plan a trip.", "Where to?")
    chat.reply("Rome.", "Lovely.")
    original = chat.session.current.id
    where = next(m for m in chat.store.list_messages(original) if m.content == "Where to?")
    copy = chat.session.branch_to_new_chat(where.id)
    assert copy is not None and chat.session.current.id == copy.id != original
    assert _shown(chat) == ["Plan a trip.", "Where to?"]
    assert [m.content for m in chat.store.list_messages(original)][-1] == "Lovely."
    assert chat.heard.of("conversations_changed")
    chat.reply("Paris instead.", "Also lovely.")  # the copy goes on by itself
    assert _shown(chat)[-2:] == ["Paris instead.", "Also lovely."]
    assert len(chat.store.list_messages(original)) == 4


def test_a_chat_opened_from_a_search_shows_its_hit_s_branch(chat):
    chat.started()
    chat.reply("Name a colour.", "Vermilion.")
    assert chat.session.regenerate()
    _answer(chat, "Blue.")
    cid = chat.session.current.id
    chat.session.open_conversation(cid, find="vermilion")
    assert _shown(chat)[-1] == "Vermilion."
    hit_id, query = chat.heard.last("search_hit")
    assert chat.store.get_message(hit_id).content == "Vermilion." and query == "vermilion"
    assert [c.id for c in chat.session.list_conversations("vermilion")] == [cid]


def test_folders_and_pins_change_the_list(chat):
    other = chat.store.create_conversation("Other")
    work = chat.session.folders.create("Work")
    assert work is not None and chat.heard.of("conversations_changed")
    assert chat.session.folders.create("work") is None
    assert "exists already" in chat.heard.last("notice")[0]
    assert chat.session.folders.move(other.id, work.id)
    assert [c.id for c in chat.session.list_conversations(folder_id=work.id)] == [other.id]
    assert chat.session.folders.pin(other.id)
    assert chat.session.list_conversations()[0].id == other.id
    assert chat.session.folders.delete(work.id)
    assert chat.session.list_conversations(folder_id=None)[0].id == other.id


def test_an_edited_message_keeps_its_images_unless_told_otherwise(chat, tmp_path):
    photo = read_image(save(red_square(), tmp_path / "photo.png", "PNG"))
    chat.started()
    conversation = chat.session.current
    first = chat.store.add_message(conversation.id, "user", "What is this?", images=[photo])
    chat.session.open_conversation(conversation.id)
    assert chat.session.edit_message(first.id, "What colour is this?")
    _answer(chat, "Red.")
    kept = chat.store.list_messages(conversation.id)[0]
    assert kept.content == "What colour is this?" and kept.images == first.images
    assert chat.session.edit_message(kept.id, "Never mind.", images=())
    assert chat.store.list_messages(conversation.id)[0].images == ()

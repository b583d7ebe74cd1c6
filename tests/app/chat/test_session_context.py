"""A message that would outgrow the chat's context is held back before anything is sent; switching
engines (a remote server and back) keeps the chat. Against a scripted engine and the real planner."""

from __future__ import annotations

from app.services.history.store import ChatSettings
from app.services.load_settings import LoadSettings
from tests.fixtures.fake_engine import FakeEngine

# ~11,000 bytes of prose: about 2,200 tokens, more than a 2,048 context holds with its reply.
LONG_TEXT = "The quick brown fox jumps over the lazy dog while the farmer watches from the porch. " * 130


def test_a_message_that_outgrows_the_context_is_held_back_then_sent_with_the_largest(chat):
    chat.started()
    assert not chat.session.send(LONG_TEXT)
    (short,) = chat.heard.last("context_outgrown")
    assert short.n_ctx == 2048 and short.needed > 2048 and short.can_reload and short.max_context > short.needed
    assert chat.engine.prompts == {} and chat.store.list_messages(chat.session.current.id) == []
    assert chat.session.send_with_larger_context(short)
    chat.engine.pump()
    assert chat.engine.loads[-1].n_ctx == short.max_context and len(chat.engine.prompts) == 1
    assert chat.session.current.settings.load.n_ctx == short.max_context
    assert chat.store.get_conversation(chat.session.current.id).settings.load.n_ctx == short.max_context


def test_auto_stays_auto_with_its_cap_raised(chat):
    chat.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=None, auto_ctx_cap=2048)))
    chat.started()
    assert chat.engine.loads[-1].n_ctx == 2048 and chat.heard.last("context_loaded") == ("Context: Auto — 2,048 tokens",)
    assert not chat.session.send(LONG_TEXT)
    (short,) = chat.heard.last("context_outgrown")
    assert chat.session.send_with_larger_context(short)
    settings = chat.session.current.settings.load
    assert settings.n_ctx is None and settings.auto_ctx_cap == short.max_context


def test_another_engine_takes_over_and_the_first_comes_back(chat):
    chat.started()
    chat.reply("Hi", "Hello")
    local, planner = chat.session.engine, chat.session.model.planner
    remote = FakeEngine(handle=chat.session.handle)
    previous = chat.session.use_engine(remote, planner)
    assert previous[0] is local and previous[1] is planner and remote.starts == 1 and len(remote.loads) == 1
    assert chat.session.engine is remote
    remote.pump()
    chat.engine = remote
    chat.reply("Still you?", "Yes")
    assert remote.prompts[remote.last_request][-1].content == "Still you?"
    chat.session.use_engine(*previous)
    assert local.starts == 2 and chat.session.engine is local

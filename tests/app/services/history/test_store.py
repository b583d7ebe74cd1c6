"""ChatStore on a real SQLite file."""

from __future__ import annotations

import json
import sqlite3

import pytest

from app.services.history.store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    ChatSettings,
    ChatStore,
    StoreDamagedError,
    StoreTooNewError,
    migrate,
)
from app.services.load_settings import LoadSettings


@pytest.fixture
def store(tmp_path):
    s = ChatStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def test_file_is_wal_with_full_sync_and_current_schema(store):
    db = store._db
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_conversation_lifecycle(store):
    settings = ChatSettings(system_prompt="Be brief.", temperature=0.2, top_p=0.9, max_tokens=64,
                            load=LoadSettings(n_ctx=2048))
    first = store.create_conversation("First", settings)
    second = store.create_conversation()
    assert second.title == "New chat"
    assert store.get_conversation(first.id).settings == settings
    store.rename_conversation(first.id, "Renamed")
    assert store.get_conversation(first.id).title == "Renamed"
    assert [c.id for c in store.list_conversations()] == [first.id, second.id]  # rename touches `updated`
    store.update_settings(second.id, ChatSettings(load=LoadSettings(n_ctx=1024)))
    assert store.get_conversation(second.id).settings.load.n_ctx == 1024
    store.add_message(second.id, "user", "hello")
    store.delete_conversation(first.id)
    assert [c.id for c in store.list_conversations()] == [second.id]
    assert store.get_conversation(first.id) is None


def test_messages_stream_finish_and_delete(store):
    conv = store.create_conversation()
    user = store.add_message(conv.id, "user", "What is 2+2?")
    reply = store.add_message(conv.id, "assistant", "", state="streaming")
    store.update_message_content(reply.id, "It is")
    assert store.get_message(reply.id).content == "It is"
    stats = {"ttft_s": 0.1, "prompt_tokens": 12, "cached_tokens": 0, "decode_tok_s": 55.0}
    store.finish_message(reply.id, "It is 4.", "complete", stats)
    messages = store.list_messages(conv.id)
    assert [(m.role, m.content, m.state) for m in messages] == [
        ("user", "What is 2+2?", "complete"),
        ("assistant", "It is 4.", "complete"),
    ]
    assert messages[1].stats == stats and messages[0].stats is None
    with pytest.raises(ValueError):
        store.finish_message(reply.id, "x", "bogus")
    store.delete_message(reply.id)
    assert [m.id for m in store.list_messages(conv.id)] == [user.id]
    store.add_message(conv.id, "assistant", "Four.")
    store.delete_message(user.id)  # a message goes with the branch under it
    assert store.list_messages(conv.id) == [] and store.message_count(conv.id) == 0


def test_deleting_a_conversation_deletes_its_messages(store):
    conv = store.create_conversation()
    msg = store.add_message(conv.id, "user", "hi")
    store.delete_conversation(conv.id)
    assert store.get_message(msg.id) is None


def test_search_matches_titles_and_message_text(store):
    paris = store.create_conversation("Trip to Paris")
    code = store.create_conversation("Code help")
    store.add_message(code.id, "assistant", "Use a dict comprehension: {k: v for k, v in pairs}")
    other = store.create_conversation("100% sure_thing")
    assert [c.id for c in store.list_conversations("paris")] == [paris.id]
    assert [c.id for c in store.list_conversations("COMPREHENSION")] == [code.id]
    assert [c.id for c in store.list_conversations("%")] == [other.id]  # LIKE wildcards are literal
    assert [c.id for c in store.list_conversations("_")] == [other.id]
    assert store.list_conversations("nothing like this") == []
    assert len(store.list_conversations("  ")) == 3


def test_streaming_messages_become_interrupted_on_open(tmp_path):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    conv = store.create_conversation()
    reply = store.add_message(conv.id, "assistant", "", state="streaming")
    store.update_message_content(reply.id, "partial answer")
    store._db.close()  # the app "crashes": nothing else runs
    reopened = ChatStore(path)
    assert reopened.recovered == 1
    message = reopened.get_message(reply.id)
    assert (message.content, message.state) == ("partial answer", "interrupted")
    reopened.close()


def test_old_database_is_upgraded(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=1)  # a file written by the first released schema
    db.execute("INSERT INTO conversations (title, created, updated) VALUES ('Old chat', 1.0, 1.0)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, state, created) VALUES (1, 'user', 'hi', 'complete', 1.0)"
    )
    db.close()
    store = ChatStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    (conv,) = store.list_conversations()
    assert conv.title == "Old chat" and conv.settings == ChatSettings()
    assert store.list_messages(conv.id)[0].stats is None
    store.close()


def test_newer_database_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "new.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreTooNewError, match="newer version of Tailor"):
        ChatStore(path)


def test_a_file_that_is_not_a_database_is_refused_as_damaged(tmp_path):
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreDamagedError, match="is damaged") as refused:
        ChatStore(path)
    assert (refused.value.problem.kind, refused.value.problem.detail) == ("damaged", "file is not a database")
    assert path.read_bytes() == b"this is not sqlite" * 100  # left as it was, for the recovery


def test_settings_json_tolerates_unknown_and_missing_keys():
    assert ChatSettings.from_json('{"temperature": 0.1, "from_the_future": 1}') == ChatSettings(
        temperature=0.1
    )
    assert ChatSettings.from_json(None) == ChatSettings()


def test_speculative_decoding_round_trips_under_the_flat_keys_of_older_releases(store):
    from models.plan.load_options import SpeculativeOptions

    speculation = SpeculativeOptions(mode="draft", draft_path="/models/draft.gguf", tokens=6)
    settings = ChatSettings(load=LoadSettings(speculation=speculation))
    data = json.loads(settings.to_json())
    # The keys an older release reads (no nested object), with these values.
    assert (data["speculative"], data["draft_path"], data["speculative_tokens"]) == ("draft", "/models/draft.gguf", 6)
    assert "speculation" not in data and "mode" not in data and "tokens" not in data
    assert ChatSettings.from_json(settings.to_json()) == settings
    conversation = store.create_conversation("Drafted", settings)
    assert store.get_conversation(conversation.id).settings.load.speculation == speculation


def test_the_nested_load_settings_are_stored_flat_key_for_key_as_before():
    """ChatSettings.load is nested in Python only: the stored JSON is the flat text every release wrote."""
    from models.plan.load_options import SpeculativeOptions, TorchOptions

    settings = ChatSettings(
        system_prompt="Be brief.", reasoning="low", think_budget=64,
        load=LoadSettings(n_ctx=2048, kv_type="q8_0", flash_attn="on", auto_ctx_cap=4096,
                          speculation=SpeculativeOptions("draft", "/m/d.gguf", 6), torch=TorchOptions(0.6, 1 << 30)),
    )
    assert settings.to_json() == (
        '{"system_prompt": "Be brief.", "temperature": 0.7, "top_p": 0.95, "max_tokens": 512, "n_ctx": 2048, '
        '"auto_ctx_cap": 4096, "kv_type": "q8_0", "flash_attn": "on", "reasoning": "low", "think_budget": 64, '
        '"tool_servers": [], "allowed_tools": [], "tool_step_cap": 10, "tool_choice": "auto", '
        '"document_budget": null, "knowledge": null, "gpu_memory_fraction": 0.6, "cpu_kv_bytes": 1073741824, "speculative": "draft", "draft_path": "/m/d.gguf", '
        '"speculative_tokens": 6}'
    )
    assert ChatSettings.from_json(settings.to_json()) == settings


def test_presets_start_with_the_pinned_default_and_can_be_saved_replaced_and_deleted(store):
    from app.services.history.store import DEFAULT_PRESET, Preset

    assert store.list_presets() == [DEFAULT_PRESET]
    assert store.pinned_prompts() == (DEFAULT_PRESET.system_prompt,)
    coder = Preset("coder", "You write Python.", temperature=0.2, top_p=0.8, max_tokens=300, pinned=True)
    store.save_preset(coder)
    store.save_preset(Preset("poet", "You rhyme.", pinned=False))
    assert [p.name for p in store.list_presets()] == ["coder", "poet", "Tailor"]
    assert store.get_preset("coder") == coder
    assert store.pinned_prompts() == ("You write Python.", DEFAULT_PRESET.system_prompt)
    store.save_preset(Preset("coder", "You write Rust.", pinned=False))  # same name: replaced
    assert store.get_preset("coder").system_prompt == "You write Rust."
    assert store.delete_preset("poet") and not store.delete_preset("poet")
    with pytest.raises(ValueError):
        store.save_preset(Preset("  ", "x"))
    applied = coder.apply_to(ChatSettings(load=LoadSettings(n_ctx=8192, kv_type="q8_0")))
    assert (applied.system_prompt, applied.temperature, applied.load.n_ctx, applied.load.kv_type) == (
        "You write Python.", 0.2, 8192, "q8_0"
    )


def test_presets_survive_reopening(tmp_path):
    from app.services.history.store import Preset

    with_preset = ChatStore(tmp_path / "c.sqlite3")
    with_preset.save_preset(Preset("coder", "You write Python.", pinned=True))
    with_preset.close()
    again = ChatStore(tmp_path / "c.sqlite3")
    assert again.get_preset("coder") == Preset("coder", "You write Python.", pinned=True)
    again.close()


def test_a_store_opened_beside_the_window_leaves_its_streaming_reply_alone(tmp_path):
    """The CLI and the window's background exports open the file with recover=False: a reply the window
    writes now stays 'streaming'; the window's own opening (after a crash) marks it interrupted."""
    path = tmp_path / "chats.sqlite3"
    window = ChatStore(path)
    chat = window.create_conversation()
    reply = window.add_message(chat.id, "assistant", "Half a", state="streaming")
    beside = ChatStore(path, recover=False)
    assert beside.recovered == 0 and beside.get_message(reply.id).state == "streaming"
    assert beside.writable  # the write probe still ran
    beside.reopen()
    assert beside.get_message(reply.id).state == "streaming"
    beside.close()
    again = ChatStore(path)
    assert again.recovered == 1 and again.get_message(reply.id).state == "interrupted"
    again.close()
    window.close()

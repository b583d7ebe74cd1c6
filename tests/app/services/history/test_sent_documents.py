"""The documents a message was sent with: kept in the history as sent (schema 10), read back defensively."""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing

import pytest

from app.services.history.schema import SCHEMA_VERSION
from app.services.history.sent_documents import (
    SentDocuments,
    SentDocumentsError,
    SentSource,
    documents_from_json,
    documents_to_json,
)
from app.services.history.store import ChatStore
from tests.app.services.history.history_files import old_history

BLOCK = "Answer from the documents below.\n\n[1] notes.txt, page 2\nThe key is under the lantern 🏮."
PASSAGE = BLOCK.index("The key")
SENT = SentDocuments(BLOCK, ("notes.txt · 3 pages · 900 tokens: too long for the context; 1 passage retrieved",),
                     (SentSource(1, "[1] notes.txt · page 2 · characters 10–41", PASSAGE, len(BLOCK)),), 31)


def test_a_message_keeps_its_documents_as_sent(tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    chat = store.create_conversation("Keys")
    added = store.add_message(chat.id, "user", "Where is the key?", documents=SENT)
    plain = store.add_message(chat.id, "assistant", "Under the lantern [1].")
    store.close()
    store = ChatStore(tmp_path / "chats.sqlite3")
    assert store.get_message(added.id).documents == SENT == added.documents
    assert store.get_message(plain.id).documents is None
    assert [m.documents for m in store.list_messages(chat.id)] == [SENT, None]
    store.close()


def test_an_older_history_is_upgraded_its_messages_without_documents(tmp_path):
    path = tmp_path / "chats.sqlite3"
    old_history(path, 9)
    store = ChatStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 10
    chat = store.list_conversations()[0]
    assert [m.documents for m in store.list_messages(chat.id)] and all(
        m.documents is None for m in store.list_messages(chat.id))
    store.close()


def test_a_damaged_value_reads_as_no_documents_and_the_chat_stays(tmp_path, caplog):
    store = ChatStore(tmp_path / "chats.sqlite3")
    chat = store.create_conversation("Keys")
    added = store.add_message(chat.id, "user", "Where is the key?", documents=SENT)
    store.close()
    with closing(sqlite3.connect(tmp_path / "chats.sqlite3")) as db:
        db.execute("UPDATE messages SET documents = '{\"block\": 3' WHERE id = ?", (added.id,))
        db.commit()
    store = ChatStore(tmp_path / "chats.sqlite3")
    with caplog.at_level(logging.WARNING):
        (message,) = store.list_messages(chat.id)
    assert message.content == "Where is the key?" and message.documents is None
    assert "cannot be read" in caplog.text
    store.close()


@pytest.mark.parametrize(("value", "said"), [
    ([], "not an object"),
    ({"notes": []}, "no block of text"),
    ({"block": "x", "tokens": -1}, "token count"),
    ({"block": "x", "tokens": 10**9}, "token count"),
    ({"block": "x", "notes": ["a\nb" * 600]}, "notes are not lines"),
    ({"block": "x", "sources": [{"number": 1, "label": "[1]", "start": 0, "end": 5}]}, "outside the block"),
    ({"block": "x", "sources": [{"number": True, "label": "[1]", "start": 0, "end": 1}]}, "no whole number"),
    ({"block": "x", "sources": [{"number": 1, "label": "a\nb", "start": 0, "end": 1}]}, "label of one line"),
    ({"block": "x", "sources": [{}] * 1001}, "more than 1000"),
])
def test_hostile_values_are_refused_by_name(value, said):
    with pytest.raises(SentDocumentsError, match=said):
        documents_from_json(json.dumps(value))


def test_the_column_round_trips_and_empty_is_none():
    assert documents_from_json(documents_to_json(SENT)) == SENT
    assert documents_to_json(None) == "" and documents_from_json("") is None
    assert SENT.message("Where?") == f"{BLOCK}\n\nWhere?" and SENT.passage(1) is SENT.sources[0]
    assert SENT.passage(2) is None

"""Exports carry the documents a message was sent with (names, the passages sent, the block as the model read
it), and a JSON export imports back with them; damaged documents in a file are named and the message kept."""

from __future__ import annotations

import base64
import json

import pytest

from app.services.history.sent_documents import SentDocuments, SentSource
from app.services.history.store import ChatStore, FileRef
from app.services.transfer.export import VERSION, load_chats, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.jobs import export_chats
from tests.app.services.transfer.test_media_transfer import imported_into

BLOCK = "Answer from the documents below.\n\n[1] manual.pdf, page 37\nThe key is under the <blue> lantern."
SENT = SentDocuments(BLOCK, ("manual.pdf · 60 pages · 31,000 tokens: too long for the context; 1 passage retrieved",),
                     (SentSource(1, "[1] manual.pdf · page 37 · characters 81,200–81,236", BLOCK.index("The key"),
                                 len(BLOCK)),), 24)


PDF_BYTES = b"%PDF-1.4 the manual, as attached\n%%EOF\n"


def history(tmp_path) -> ChatStore:
    store = ChatStore(tmp_path / "history" / "chats.sqlite3")
    chat = store.create_conversation("Keys")
    kept = store.media.put(PDF_BYTES, ".pdf")
    store.add_message(chat.id, "user", "Where is the key?", documents=SENT,
                      files=(FileRef(kept.sha256, "PDF", "manual.pdf"),))
    store.add_message(chat.id, "assistant", "Under the lantern [1].")
    return store


def test_a_json_export_imports_back_with_the_documents(tmp_path):
    store = history(tmp_path)
    target = tmp_path / "out" / "chats.json"
    target.parent.mkdir()
    assert export_chats(store.path, None, "json", target) == 1
    document = json.loads(target.read_text())
    assert document["version"] == VERSION == 6
    first, second = document["chats"][0]["messages"]
    assert first["documents"]["block"] == BLOCK and first["documents"]["notes"] == list(SENT.notes)
    assert second["documents"] is None
    assert first["files"] == [{"sha256": first["files"][0]["sha256"], "format": "PDF", "name": "manual.pdf"}]
    again, result = imported_into(tmp_path, target)
    assert result.notes == [] and len(result.imported) == 1
    (chat,) = again.list_conversations()
    assert [m.documents for m in again.list_messages(chat.id)] == [SENT, None]
    assert again.list_messages(chat.id)[0].files == ()  # named only: the export was made without the files


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "beside"])
def test_with_files_the_originals_travel_and_come_back(tmp_path, embed):
    store = history(tmp_path)
    target = tmp_path / "out" / "chats.json"
    target.parent.mkdir()
    assert export_chats(store.path, None, "json", target, embed_media=embed, with_files=True) == 1
    (item,) = json.loads(target.read_text())["chats"][0]["messages"][0]["files"]
    if embed:
        assert base64.b64decode(item["data"]) == PDF_BYTES
    else:
        assert (target.parent / item["file"]).read_bytes() == PDF_BYTES
    again, result = imported_into(tmp_path, target)
    assert result.notes == []
    (chat,) = again.list_conversations()
    (kept,) = again.list_messages(chat.id)[0].files
    assert (kept.name, kept.format) == ("manual.pdf", "PDF") and again.media.read(kept.sha256) == PDF_BYTES


def test_an_original_changed_beside_the_export_is_named_and_left_out(tmp_path):
    store = history(tmp_path)
    target = tmp_path / "out" / "chats.json"
    target.parent.mkdir()
    export_chats(store.path, None, "json", target, with_files=True)
    (item,) = json.loads(target.read_text())["chats"][0]["messages"][0]["files"]
    (target.parent / item["file"]).write_bytes(b"%PDF-1.4 changed\n")
    again, result = imported_into(tmp_path, target)
    (note,) = result.notes
    assert "an attached file could not be imported" in note and "manual.pdf does not hold the bytes" in note
    (chat,) = again.list_conversations()
    assert again.list_messages(chat.id)[0].files == () and again.list_messages(chat.id)[0].documents == SENT


def test_damaged_documents_in_a_file_are_named_and_the_message_kept(tmp_path):
    store = history(tmp_path)
    target = tmp_path / "chats.json"
    export_chats(store.path, None, "json", target)
    document = json.loads(target.read_text())
    document["chats"][0]["messages"][0]["documents"]["sources"][0]["end"] = 10**6
    target.write_text(json.dumps(document))
    again, result = imported_into(tmp_path, target)
    (note,) = result.notes
    assert "documents of 1 message(s) could not be imported" in note and "outside the block" in note
    (chat,) = again.list_conversations()
    first = again.list_messages(chat.id)[0]
    assert first.content == "Where is the key?" and first.documents is None


def test_markdown_and_html_carry_the_names_the_passages_and_the_block(tmp_path):
    store = history(tmp_path)
    records = load_chats(store)
    markdown = to_markdown(records)
    assert f"- {SENT.notes[0]}" in markdown and f"- {SENT.sources[0].label}" in markdown
    assert "- Attached: manual.pdf" in markdown and "Attached: manual.pdf" in to_html(records)
    assert "<summary>Documents as sent</summary>" in markdown and BLOCK in markdown
    html = to_html(records)
    assert SENT.sources[0].label in html and "under the &lt;blue&gt; lantern" in html and "<blue>" not in html

"""Exporting chats from a real history file: Tailor's JSON (complete with every branch, deterministic), Markdown
and HTML (the branch shown, its other versions named)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from app.services.transfer.export import (
    FORMAT,
    UnknownChatError,
    chat_dict,
    close_fences,
    fence_for,
    find_chat_id,
    load_chats,
    safe_filename,
    to_json,
    to_markdown,
)
from app.services.transfer.export_html import to_html

CUT_OFF_CODE = "Here is the start:\n\n```python\ndef f():\n    return 1"
NESTED_FENCES = "Like this:\n\n````markdown\n```python\nprint(1)\n```\n````\n\nDone."
SCRIPT = 'Try <script>alert("x")</script> & <img src="http://evil.example/x.png">'


def make_history(path: Path) -> ChatStore:
    """Two chats: one with reasoning, stats, odd settings and states; one with code and markup."""
    store = ChatStore(path)
    first = store.create_conversation("Maths", ChatSettings(system_prompt="Be exact.", temperature=0.1,
                                                            load=LoadSettings(n_ctx=None), reasoning="high",
                                                            think_budget=256))
    store.add_message(first.id, "user", "What is 17 * 23?")
    reply = store.add_message(first.id, "assistant", "", state="streaming")
    store.finish_message(reply.id, "391.", "complete", {"gen_tokens": 12, "reasoning_tokens": 40, "ttft_s": 0.25},
                         "17 * 20 = 340, 17 * 3 = 51", True)
    cut = store.add_message(first.id, "assistant", "", state="streaming")
    store.finish_message(cut.id, "", "cancelled", None, "Let me think again about", False)
    second = store.create_conversation("Code / <b>HTML</b>\x07")
    store.add_message(second.id, "user", SCRIPT)
    store.add_message(second.id, "assistant", NESTED_FENCES)
    store.add_message(second.id, "user", "And a cut-off one?")
    store.add_message(second.id, "assistant", CUT_OFF_CODE, state="interrupted")
    return store


def add_branches(store: ChatStore) -> int:
    """A chat in folder "Work", pinned, with a regenerated reply and an edited first question; it shows
    the branch "Name a colour" / "Blue" / "Another?" / "Green". Returns its id."""
    chat = store.create_conversation("Branches")
    question = store.add_message(chat.id, "user", "Name a colour")
    store.add_message(chat.id, "assistant", "Red")
    store.add_message(chat.id, "assistant", "Blue", parent_id=question.id)  # regenerated: its version 2
    store.add_message(chat.id, "user", "Another?")
    green = store.add_message(chat.id, "assistant", "Green")
    store.add_message(chat.id, "user", "Name a fruit", parent_id=None)  # the first question edited
    store.add_message(chat.id, "assistant", "Apple")
    store.show_branch(green.id)
    store.move_conversation(chat.id, store.create_folder("Work").id)
    store.set_pinned(chat.id, True)
    return chat.id


@pytest.fixture
def store(tmp_path: Path):
    store = make_history(tmp_path / "chats.sqlite3")
    yield store
    store.close()


def test_json_holds_every_field_of_every_chat(store: ChatStore):
    document = json.loads(to_json(load_chats(store)))
    assert (document["format"], document["version"]) == (FORMAT, 6)
    maths, code = document["chats"]  # oldest first
    assert set(maths) == {"id", "title", "created", "updated", "settings", "folder", "pinned", "leaf", "messages"}
    assert (maths["folder"], maths["pinned"], maths["leaf"]) == (None, False, 3)
    assert str(uuid.UUID(maths["id"])) == maths["id"] != code["id"]
    assert maths["title"] == "Maths" and maths["created"] <= maths["updated"]
    settings = ChatSettings.from_json(json.dumps(maths["settings"]))
    assert (settings.system_prompt, settings.temperature, settings.load.n_ctx, settings.reasoning,
            settings.think_budget) == ("Be exact.", 0.1, None, "high", 256)
    question, answer, cut = maths["messages"]
    assert question == {"id": 1, "parent": None, "role": "user", "content": "What is 17 * 23?", "reasoning": "",
                        "reasoning_closed": True, "state": "complete", "stats": None, "created": question["created"],
                        "tool_steps": [], "images": [], "audio": [], "documents": None, "files": []}
    assert [(m["id"], m["parent"]) for m in maths["messages"]] == [(1, None), (2, 1), (3, 2)]
    assert answer["reasoning"] == "17 * 20 = 340, 17 * 3 = 51" and answer["stats"]["reasoning_tokens"] == 40
    assert (cut["state"], cut["reasoning_closed"], cut["content"]) == ("cancelled", False, "")
    assert [m["content"] for m in code["messages"]] == [SCRIPT, NESTED_FENCES, "And a cut-off one?", CUT_OFF_CODE]
    assert code["messages"][3]["state"] == "interrupted"


def test_json_is_the_same_bytes_each_time_header_first_and_keys_sorted(store: ChatStore, tmp_path: Path):
    add_branches(store)
    records = load_chats(store)
    text = to_json(records)
    store.close()
    again = ChatStore(tmp_path / "chats.sqlite3")
    assert to_json(load_chats(again)) == text
    again.close()
    assert text.startswith('{\n  "format": "tailor-chats",\n  "version": 6,\n  "chats": [\n') and text.endswith("}\n")
    # Written a chat at a time, it is exactly json.dumps of the whole: the header first, each chat's keys sorted.
    chats = [json.loads(json.dumps(chat_dict(r), sort_keys=True)) for r in records]
    whole = {"format": FORMAT, "version": 6, "chats": chats}
    assert text == json.dumps(whole, ensure_ascii=False, indent=2) + "\n"
    assert to_json([]) == json.dumps({**whole, "chats": []}, indent=2) + "\n"


def test_json_holds_every_branch_folder_and_pin(store: ChatStore):
    cid = add_branches(store)
    (chat,) = [c for c in json.loads(to_json(load_chats(store)))["chats"] if c["title"] == "Branches"]
    assert (chat["folder"], chat["pinned"], chat["leaf"]) == ("Work", True, 5)
    assert [(m["id"], m["parent"], m["content"]) for m in chat["messages"]] == [
        (1, None, "Name a colour"), (2, 1, "Red"), (3, 1, "Blue"), (4, 3, "Another?"), (5, 4, "Green"),
        (6, None, "Name a fruit"), (7, 6, "Apple"),
    ]
    assert len(chat["messages"]) == store.message_count(cid)


def test_markdown_and_html_show_the_branch_shown_and_name_other_versions(store: ChatStore):
    cid = add_branches(store)
    (record,) = load_chats(store, [cid])
    text = to_markdown([record])
    assert " · 4 messages (7 in all its branches) · in Work · pinned*\n" in text
    assert "### You *(version 1 of 2)*\n\nName a colour" in text
    assert "### Assistant *(version 2 of 2)*\n\nBlue" in text
    assert "### You\n\nAnother?" in text and "### Assistant\n\nGreen" in text
    assert "Red" not in text and "Apple" not in text and "fruit" not in text
    page = to_html([record])
    assert page.count('class="message ') == 4 and "Red" not in page and "Apple" not in page
    assert page.count('<span class="version">· version 1 of 2</span>') == 1
    assert '<span class="version">· version 2 of 2</span>' in page
    assert "4 messages (7 in all its branches) · in Work · pinned" in page


def test_one_chat_by_number_or_uuid(store: ChatStore):
    code = store.list_conversations()[0]
    uid = store.conversation_uid(code.id)
    assert find_chat_id(store, str(code.id)) == find_chat_id(store, uid) == find_chat_id(store, uid.upper()) == code.id
    (record,) = load_chats(store, [code.id])
    assert record.uid == uid and len(record.messages) == 4 and record.branch() == list(record.messages)
    with pytest.raises(UnknownChatError, match="No chat '999'"):
        find_chat_id(store, "999")


def test_new_chats_get_a_stable_id_of_their_own(store: ChatStore):
    uids = [store.conversation_uid(c.id) for c in store.list_conversations()]
    uids.append(store.conversation_uid(store.create_conversation().id))
    assert len(set(uids)) == 3 and all(uuid.UUID(u).version == 4 for u in uids)
    assert store.conversation_uid(12345) is None


def _top_level(markdown: str) -> list[tuple[str, str]]:
    """(token type, content) of the top-level blocks CommonMark sees in `markdown`."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [(t.type, tokens[i + 1].content if t.type == "heading_open" else t.content)
            for i, t in enumerate(tokens) if t.level == 0]


def test_markdown_has_a_title_per_chat_speakers_and_code_kept_verbatim(store: ChatStore):
    text = to_markdown(load_chats(store))
    assert text.count("\n# ") + text.startswith("# ") == 2
    assert "# Code / <b>HTML</b>\n" in text  # the control character is gone from the title
    assert "### You\n\nWhat is 17 * 23?" in text and "### Assistant *(interrupted)*" in text
    assert NESTED_FENCES in text  # code, with its inner fence, exactly as written
    blocks = _top_level(text)
    headings = [content for kind, content in blocks if kind == "heading_open"]
    # Every speaker heading is a heading: no open fence swallowed what follows it.
    assert sum(h.startswith("Assistant") for h in headings) == 4 and sum(h == "You" for h in headings) == 3
    fences = [content for kind, content in blocks if kind == "fence"]
    assert "```python\nprint(1)\n```\n" in fences and "def f():\n    return 1\n" in fences


def test_markdown_reasoning_is_a_collapsed_details_block(store: ChatStore):
    text = to_markdown(load_chats(store))
    assert "<details><summary>Thought</summary>\n\n17 * 20 = 340, 17 * 3 = 51\n\n</details>" in text
    assert "<details><summary>Thought (cut off)</summary>\n\nLet me think again about\n\n</details>" in text
    assert "<details><summary>System prompt</summary>\n\n```text\nBe exact.\n```" in text


def test_fences_longer_than_the_text_and_cut_off_code_closed():
    assert fence_for("no code") == "```" and fence_for("a ```` b") == "`````"
    assert close_fences(CUT_OFF_CODE) == CUT_OFF_CODE + "\n```"
    assert close_fences(NESTED_FENCES) == NESTED_FENCES
    assert close_fences("inline ```code``` only") == "inline ```code``` only"


def test_html_is_one_page_that_runs_nothing_and_loads_nothing(store: ChatStore):
    page = to_html(load_chats(store))
    assert page.startswith("<!DOCTYPE html>") and page.count("<section>") == 2
    lowered = page.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<link" not in lowered
    assert not re.search(r"<[^>]*\ssrc=", lowered) and "@import" not in lowered
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<h1>Code / &lt;b&gt;HTML&lt;/b&gt;</h1>" in page
    assert "<details><summary>Thought (cut off)</summary>" in page
    assert '<pre style="' in page and "print" in page  # code blocks keep their inline styles
    assert "default-src 'none'" in page


def test_an_empty_history_exports_an_empty_list(tmp_path: Path):
    store = ChatStore(tmp_path / "empty.sqlite3")
    assert json.loads(to_json(load_chats(store)))["chats"] == []
    store.close()


@pytest.mark.parametrize(("title", "expected"), [
    ("Plain", "Plain-0123abcd.md"),
    ("../../etc/passwd", "etc-passwd-0123abcd.md"),
    ("a\\b/c:d*e?f\"g<h>i|j", "a-b-c-d-e-f-g-h-i-j-0123abcd.md"),
    ("line\nbreak\ttab\x00nul\x1b[31m", "line break tab nul [31m-0123abcd.md"),
    ("...", "chat-0123abcd.md"),
    ("", "Untitled chat-0123abcd.md"),
    ("x" * 300, "x" * 80 + "-0123abcd.md"),
])
def test_file_names_of_chats_are_safe(title: str, expected: str):
    name = safe_filename(title, "0123abcd-0000-4000-8000-000000000000", "md")
    assert name == expected
    assert "/" not in name and "\\" not in name and not any(ord(ch) < 32 for ch in name)


def test_stats_json_cannot_hold_become_null(tmp_path: Path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    chat = store.create_conversation("Fast")
    reply = store.add_message(chat.id, "assistant", "", state="streaming")
    store.finish_message(reply.id, "ok", "complete", {"decode_tok_s": float("inf"), "per": [float("nan"), 1.5]})
    (message,) = json.loads(to_json(load_chats(store)))["chats"][0]["messages"]
    assert message["stats"] == {"decode_tok_s": None, "per": [None, 1.5]}
    store.close()

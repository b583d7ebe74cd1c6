"""Importing ChatGPT's conversations.json into a real history file: each conversation's whole tree becomes the
chat's branches (tests/fixtures/chatgpt/conversations.json is shaped as real exports are), left-out nodes hand
their children on, broken trees are skipped by name, a 100,000-message conversation imports."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.services.history.store import DEFAULT_TITLE, ChatSettings, ChatStore, ToolCallRecord, ToolStep
from app.services.transfer.export import load_chats, to_json
from app.services.transfer.importer import ChatImportError, import_file
from tests.app.services.history.history_files import chats_of
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "chatgpt" / "conversations.json"


def node(node_id: str, parent: str | None, role: str | None = None, text: str | None = None, *,
         created: float | None = None, content: dict | None = None, **message: object) -> tuple[str, dict]:
    """One entry of a ChatGPT mapping; no role: a node without a message (the root)."""
    entry: dict = {"id": node_id, "parent": parent, "children": [], "message": None}
    if role is not None:
        entry["message"] = {
            "id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": created,
            "content": content or {"content_type": "text", "parts": [text]}, "status": "finished_successfully",
            "recipient": "all", "metadata": {}, "weight": 1.0, **message,
        }
    return node_id, entry


def chatgpt_conversation(cid: str, title: str, nodes: list[tuple[str, dict]], current: str) -> dict:
    mapping = dict(nodes)
    for node_id, entry in nodes:  # children as ChatGPT lists them
        if entry["parent"] in mapping:
            mapping[entry["parent"]]["children"].append(node_id)
    return {"title": title, "create_time": 1700000000.5, "update_time": 1700000300.25, "mapping": mapping,
            "current_node": current, "conversation_id": cid, "id": cid, "default_model_slug": "gpt-4o"}


def chatgpt_export() -> list[dict]:
    """Four conversations: one with branches, a reasoning step and a hidden system message; one whose parents
    go round in a cycle; one with a missing parent; one with a tool call and an image."""
    branches = chatgpt_conversation("c-branches", "Greetings", [
        node("root", None),
        node("sys", "root", "system", "", metadata={"is_visually_hidden_from_conversation": True}),
        node("u1", "sys", "user", "Hi", created=1700000001.0),
        node("a1-old", "u1", "assistant", "Hello (the first try)", created=1700000002.0),
        node("a1", "u1", "assistant", "Hey!", created=1700000003.0),
        node("u2", "a1", "user", "Some code?", created=1700000004.0),
        node("t", "u2", "assistant", None, content={"content_type": "thoughts", "thoughts": [
            {"summary": "Plan", "content": "A one-liner will do."}]}),
        node("a2", "t", "assistant", "```python\nprint('hi')\n```", created=1700000005.0),
    ], current="a2")
    cycle = chatgpt_conversation("c-cycle", "Round and round", [
        node("x", "y", "user", "x"), node("y", "x", "assistant", "y"),
    ], current="x")
    orphan = chatgpt_conversation("c-orphan", "Orphan", [node("a", "gone", "assistant", "lost")], current="a")
    tools = chatgpt_conversation("c-tools", "Tools and images", [
        node("root", None),
        node("u", "root", "user", None, content={"content_type": "multimodal_text", "parts": [
            {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}, "What is this?"]}),
        node("call", "u", "assistant", None, content={"content_type": "code", "text": "look()"}, recipient="python"),
        node("out", "call", "tool", "result"),
        node("a", "out", "assistant", "A cat."),
    ], current="a")
    return [branches, cycle, orphan, tools]


@pytest.fixture
def store(tmp_path: Path):
    store = ChatStore(tmp_path / "target.sqlite3")
    yield store
    store.close()


def _tree(store: ChatStore, cid: int) -> list[tuple[int, int | None, str, str]]:
    """(number, parent's number, role, text) of every message of the chat, numbered from 1 in order."""
    messages = store.all_messages(cid)
    number = {m.id: i + 1 for i, m in enumerate(messages)}
    return [(number[m.id], number.get(m.parent_id), m.role, m.content) for m in messages]


def _chat(store: ChatStore, title: str) -> int:
    return next(c.id for c in store.list_conversations() if c.title == title)


def test_a_real_shaped_export_keeps_every_branch(store: ChatStore):
    result = import_file(store, FIXTURE)
    assert (result.source, result.imported, result.problems, result.error) == (
        "chatgpt", ["Lisbon in a day", "Reading a chart", "Cut short"], [], None)
    lisbon = _chat(store, "Lisbon in a day")
    assert _tree(store, lisbon) == [
        (1, None, "user", "Plan a day in Lisbon for me."),
        (2, 1, "assistant", "Morning in Belém: the tower and pastéis de nata."),
        (3, 1, "assistant", "Start in Alfama at sunrise, then ride tram 28 🚋."),  # regenerated
        (4, 3, "user", "And dinner?"),
        (5, 4, "assistant", "A tasca in Bairro Alto, then fado."),
        (6, None, "user", "Plan a rainy day in Lisbon for me."),  # the first question edited
        (7, 6, "assistant", "Gulbenkian, then the tile museum, then Time Out Market."),
    ]
    shown = store.list_messages(lisbon)  # current_node: the edited branch
    assert [m.content for m in shown] == ["Plan a rainy day in Lisbon for me.",
                                          "Gulbenkian, then the tile museum, then Time Out Market."]
    assert shown[1].reasoning == "Rain: museums and covered markets.\n\nGulbenkian first, it opens at 10."
    assert [m.created for m in shown] == [1717236600.0, 1717236608.5]
    assert [(v.index, v.count) for v in (store.versions(lisbon)[m.id] for m in shown)] == [(2, 2), (1, 1)]
    conversation = store.get_conversation(lisbon)
    assert (conversation.created, conversation.updated) == (1717236000.123456, 1717236900.654321)
    chart = _chat(store, "Reading a chart")
    assert _tree(store, chart) == [
        # The hidden custom instructions left out; the chart is not beside the file.
        (1, None, "user", "[image not in the export: file-Ab12Cd34Ef56]\nWhat does this chart say?"),
        (2, 1, "assistant", "Sales rose every quarter; Q4 doubled Q1."),  # the code call and its output: a step
    ]
    (step,) = store.list_messages(chart)[1].tool_steps
    assert step == ToolStep("", (ToolCallRecord(
        "3d4e5f6a-1004-4b8c-9d9e-0f1a2b3c4d5e", "python",
        json.dumps({"code": "from PIL import Image\nImage.open('/mnt/data/chart.png').size"}), "", "ok", "(800, 600)",
        1.0),))
    cut = _chat(store, "Cut short")  # current_node is the tool's output: the branch ends at the reply holding it
    question, reply = store.list_messages(cut)
    assert (question.content, reply.content, reply.state) == ("Compute 2**100.", "", "complete")
    assert [(c.name, c.arguments, c.status, c.result) for c in reply.tool_steps[0].calls] == [
        ("python", '{"code": "2**100"}', "ok", "1267650600228229401496703205376")]


def test_a_chatgpt_chat_exports_and_imports_again_as_tailors_own(store: ChatStore, tmp_path: Path):
    import_file(store, FIXTURE)
    text = to_json(load_chats(store))
    path = tmp_path / "tailor.json"
    path.write_text(text, encoding="utf-8")
    other = ChatStore(tmp_path / "other.sqlite3")
    assert len(import_file(other, path).imported) == 3
    assert to_json(load_chats(other)) == text
    other.close()


def test_importing_it_twice_adds_nothing(store: ChatStore):
    import_file(store, FIXTURE)
    again = import_file(store, FIXTURE)
    assert again.imported == [] and again.skipped == ["Lisbon in a day", "Reading a chart", "Cut short"]
    assert len(store.list_conversations()) == 3


def test_broken_trees_are_skipped_by_name_and_the_others_imported(store: ChatStore, tmp_path: Path):
    side_cycle = chatgpt_conversation("c-side", "Side cycle", [
        node("root", None), node("u", "root", "user", "fine"), node("p", "q", "user", "p"), node("q", "p", "user", "q"),
    ], current="u")
    lost_current = chatgpt_conversation("c-lost", "Lost current", [node("root", None), node("u", "root", "user", "hi")],
                                        current="nowhere")
    no_current = {**lost_current, "conversation_id": "c-none", "id": "c-none", "title": "", "current_node": None}
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([*chatgpt_export(), "nonsense", side_cycle, lost_current, no_current]), encoding="utf-8")
    result = import_file(store, path)
    assert result.problems == [
        "Skipped conversation 2 ('Round and round'): its messages' parents form a cycle (at node 'x')",
        "Skipped conversation 3 ('Orphan'): message 'gone' is missing from its mapping",
        "Skipped conversation 5: it is not an object",
        "Skipped conversation 6 ('Side cycle'): its messages' parents form a cycle (at node 'p')",
        "Skipped conversation 7 ('Lost current'): message 'nowhere' is missing from its mapping",
        "Skipped conversation 8: it has no current_node",
    ]
    assert result.imported == ["Greetings", "Tools and images"] and result.error is None
    assert chats_of(store) == [
        ("Greetings", ["Hi", "Hey!", "Some code?", "```python\nprint('hi')\n```"]),
        ("Tools and images", ["[image not in the export: x]\nWhat is this?", "A cat."]),
    ]
    greetings = _chat(store, "Greetings")
    assert [m.content for m in store.all_messages(greetings)][:3] == ["Hi", "Hello (the first try)", "Hey!"]
    assert [m.reasoning for m in store.list_messages(greetings)] == ["", "", "", "A one-liner will do."]


def test_a_visible_system_message_becomes_the_system_prompt(store: ChatStore, tmp_path: Path):
    chat = chatgpt_conversation("c-sys", "", [
        node("root", None), node("s", "root", "system", "Answer in French."), node("u", "s", "user", "Hello"),
        node("a", "u", "assistant", "Bonjour"),
    ], current="a")
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([chat]), encoding="utf-8")
    import_file(store, path)
    (conversation,) = store.list_conversations()
    assert conversation.title == "ChatGPT chat" != DEFAULT_TITLE
    assert conversation.settings.system_prompt == "Answer in French." != ChatSettings().system_prompt
    assert [m.content for m in store.all_messages(conversation.id)] == ["Hello", "Bonjour"]


def test_a_list_whose_first_member_is_no_conversation_is_refused(store: ChatStore, tmp_path: Path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"title": "no mapping"}, *chatgpt_export()]), encoding="utf-8")
    with pytest.raises(ChatImportError, match="not a Tailor chat export \\(nor ChatGPT's conversations.json\\)"):
        import_file(store, path)
    path.write_text("[]", encoding="utf-8")
    result = import_file(store, path)
    assert (result.source, result.imported, result.error) == ("chatgpt", [], None)
    assert store.list_conversations() == []


def _long_conversation(path: Path, turns: int) -> None:
    """One conversation of `turns` questions and answers in a line, an answer regenerated every 1,000 turns;
    written as it is made."""
    with open(path, "w", encoding="utf-8") as f:
        f.write('[{"title": "Long", "create_time": 1.0, "update_time": 2.0, "conversation_id": "c-long", '
                '"mapping": {"root": {"id": "root", "message": null, "parent": null, "children": []}')
        parent = "root"
        for i in range(turns):
            for role, node_id in (("user", f"u{i}"), ("assistant", f"a{i}")):
                message = {"author": {"role": role}, "content": {"content_type": "text", "parts": [f"{role} {i}"]},
                           "create_time": 10.0 + i}
                f.write(f', "{node_id}": ' + json.dumps({"id": node_id, "message": message, "parent": parent}))
                if role == "assistant" and i % 1000 == 0:  # a version left behind
                    f.write(f', "{node_id}-old": ' + json.dumps({"id": node_id, "message": message, "parent": parent}))
                parent = node_id
        f.write(f'}}, "current_node": "{parent}"}}]')


def test_a_conversation_of_100000_messages_imports_whole(store: ChatStore, tmp_path: Path):
    path = tmp_path / "conversations.json"
    _long_conversation(path, 50_000)
    started = time.perf_counter()
    result = import_file(store, path)
    elapsed = time.perf_counter() - started
    assert result.imported == ["Long"] and result.problems == [] and result.error is None
    (chat,) = store.list_conversations()
    assert store.message_count(chat.id) == 100_050
    shown = store.list_messages(chat.id)
    assert len(shown) == 100_000 and (shown[0].content, shown[-1].content) == ("user 0", "assistant 49999")
    assert elapsed < 60  # about 3 s here: no step of it goes over the messages more than a few times

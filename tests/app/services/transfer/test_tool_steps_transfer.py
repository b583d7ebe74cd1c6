"""A reply's tool steps going out of the history and back in: Tailor's JSON carries them exactly (every call's
every field survives export → import → export), Markdown and HTML show them readably with results cut and
never run, hostile steps in a file cost those steps and nothing else, and the CLI prints and finds them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app.cli.main import main
from app.services.history.store import ChatSettings, ChatStore, ToolCallRecord, ToolStep
from app.services.history.tool_steps import MAX_CALLS
from app.services.transfer.export import load_chats, to_json, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.export_steps import SHOWN_CHARS
from app.services.transfer.importer import import_file

FENCED = "```python\nprint('a fence in a result')\n```\nand after it"
SCRIPT = '<script>alert("x")</script> & <img src="http://evil.example/x.png">'
READ = ToolCallRecord("call-1", "read_file", '{"path": "notes.txt", "lines": [1, 2]}', "files", "ok", "ship it ✓", 0.4)
STEPS = (
    ToolStep("Let me read the notes first.", (READ,), reasoning="The notes hold the plan."),
    ToolStep("", (
        ToolCallRecord("call-2", "fetch", '{"url": "https://example.org"}', "web", "ok", SCRIPT + "\n" + FENCED, 1.25),
        ToolCallRecord("call-3", "rm", '{"path": "/"}', "shell", "denied", "Denied by you."),
        ToolCallRecord("call-4", "grep", "not json at all", "", "failed", "grep: bad pattern", 0.0),
        ToolCallRecord("call-5", "slow", "{}", "files", "skipped", "Not run: the reply reached its step cap."),
    )),
)


def tool_history(path: Path) -> tuple[ChatStore, int]:
    """A chat whose reply called tools over two steps, a regenerated version with steps of its own, and a
    reply that ended after its calls without writing more; (store, chat id)."""
    store = ChatStore(path)
    chat = store.create_conversation("Tools")
    question = store.add_message(chat.id, "user", "Summarise my notes.")
    old = store.add_message(chat.id, "assistant", "", state="streaming")
    store.update_message_tool_steps(old.id, (ToolStep("", (READ.ended("failed", "no such file", 0.1),)),))
    store.finish_message(old.id, "I could not read them.", "complete")
    reply = store.add_message(chat.id, "assistant", "", state="streaming", parent_id=question.id)
    store.update_message_tool_steps(reply.id, STEPS, "The notes")
    store.finish_message(reply.id, "The notes say: ship it.", "complete", {"decode_tok_s": 40.0}, "Done.", True)
    store.add_message(chat.id, "user", "Again?")
    silent = store.add_message(chat.id, "assistant", "", state="streaming")
    store.finish_message(silent.id, "", "interrupted", tool_steps=(ToolStep("Once more.", (READ,)),))
    return store, chat.id


def _fields(store: ChatStore, chat_id: int) -> list[tuple]:
    """Every message of every branch as the history holds it, ids aside (numbered in order)."""
    messages = store.all_messages(chat_id)
    number = {m.id: i + 1 for i, m in enumerate(messages)}
    return [(number.get(m.parent_id), m.role, m.content, m.state, m.stats, m.created, m.reasoning, m.reasoning_closed,
             m.tool_steps) for m in messages]


# ---------------------------------------------------------------- Tailor's JSON


def test_json_export_and_import_keep_every_field_of_every_call(tmp_path: Path):
    store, chat_id = tool_history(tmp_path / "source.sqlite3")
    text = to_json(load_chats(store))
    path = tmp_path / "chats.json"
    path.write_text(text, encoding="utf-8")
    fresh = ChatStore(tmp_path / "fresh.sqlite3")
    result = import_file(fresh, path)
    assert (result.imported, result.problems, result.notes, result.error) == (["Tools"], [], [], None)
    (copy,) = fresh.list_conversations()
    assert _fields(fresh, copy.id) == _fields(store, chat_id)
    assert fresh.list_messages(copy.id)[-1].tool_steps == (ToolStep("Once more.", (READ,)),)
    assert to_json(load_chats(fresh)) == text  # and out again, byte for byte
    store.close()
    fresh.close()


def test_a_chats_tool_settings_travel_with_it_and_a_bad_tool_choice_is_refused_by_name(tmp_path: Path):
    store = ChatStore(tmp_path / "source.sqlite3")
    settings = replace(ChatSettings(), tool_servers=("echo",), tool_choice="required")
    store.add_message(store.create_conversation("Must call", settings).id, "user", "Echo hello.")
    exported = json.loads(to_json(load_chats(store)))
    assert exported["chats"][0]["settings"]["tool_choice"] == "required"
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    fresh = ChatStore(tmp_path / "fresh.sqlite3")
    assert import_file(fresh, path).notes == []
    assert fresh.list_conversations()[0].settings == settings
    exported["chats"][0]["settings"]["tool_choice"] = "always"
    path.write_text(json.dumps(exported), encoding="utf-8")
    other = ChatStore(tmp_path / "other.sqlite3")
    result = import_file(other, path)
    assert result.imported == ["Must call"] and result.notes == [
        "Mended chat 1 ('Must call'): setting 'tool_choice' must be one of auto, required, not 'always': the default "
        "'auto' is used"]
    assert other.list_conversations()[0].settings == replace(settings, tool_choice="auto")  # the rest kept
    for opened in (store, fresh, other):
        opened.close()


def test_a_step_in_the_json_export_is_its_to_dict(tmp_path: Path):
    store, _ = tool_history(tmp_path / "h.sqlite3")
    (chat,) = json.loads(to_json(load_chats(store)))["chats"]
    reply = chat["messages"][2]
    assert reply["tool_steps"][0] == {
        "text": "Let me read the notes first.", "reasoning": "The notes hold the plan.",
        "calls": [{"id": "call-1", "name": "read_file", "arguments": '{"path": "notes.txt", "lines": [1, 2]}',
                   "server": "files", "status": "ok", "result": "ship it ✓", "seconds": 0.4}],
    }
    assert chat["messages"][0]["tool_steps"] == []
    store.close()


# ---------------------------------------------------------------- Markdown and HTML


def test_markdown_shows_each_step_then_the_answer(tmp_path: Path):
    store, _ = tool_history(tmp_path / "h.sqlite3")
    markdown = to_markdown(load_chats(store))
    reply = markdown[markdown.index("### Assistant *(version 2 of 2)*"):markdown.index("### You\n\nAgain?")]
    order = ["<summary>Thought</summary>", "The notes hold the plan.", "Let me read the notes first.",
             "Called `read_file` (server files) · ok · 0.4 s",
             '```json\n{\n  "path": "notes.txt",\n  "lines": [\n    1,\n    2\n  ]\n}\n```',
             "Result:\n\n```text\nship it ✓\n```", "Called `fetch` (server web) · ok · 1.2 s",
             "Called `rm` (server shell) · denied", "Called `grep` · failed", "```text\nnot json at all\n```",
             "Called `slow` (server files) · skipped", "The notes say: ship it."]
    places = [reply.index(part) for part in order]
    assert places == sorted(places)
    assert "*(empty)*" not in markdown  # the reply that ended after its calls shows them, not "(empty)"
    # The result's own fence stays inside its block: one code block holds the whole result.
    blocks = [t.content for t in MarkdownIt().parse(reply) if t.type == "fence"]
    assert SCRIPT + "\n" + FENCED + "\n" in blocks
    store.close()


def test_a_long_result_is_cut_and_says_how_much_more_there_was(tmp_path: Path):
    store = ChatStore(tmp_path / "h.sqlite3")
    chat = store.create_conversation("Long")
    reply = store.add_message(chat.id, "assistant", "Read.")
    long = "x" * (SHOWN_CHARS + 12_345)
    store.update_message_tool_steps(reply.id, (ToolStep("", (READ.ended("ok", long, 2.0),)),), "Read.")
    records = load_chats(store)
    markdown, html = to_markdown(records), to_html(records)
    assert "x" * SHOWN_CHARS + "\n```\n\n*… (12,345 more characters)*" in markdown
    assert "x" * (SHOWN_CHARS + 1) not in markdown and "x" * (SHOWN_CHARS + 1) not in html
    assert "… (12,345 more characters)" in html
    assert json.loads(to_json(records))["chats"][0]["messages"][0]["tool_steps"][0]["calls"][0]["result"] == long
    store.close()


def test_html_shows_results_arguments_and_names_as_text_never_markup(tmp_path: Path):
    store = ChatStore(tmp_path / "h.sqlite3")
    chat = store.create_conversation("Hostile")
    reply = store.add_message(chat.id, "assistant", "Done.")
    hostile = ToolCallRecord("c", "<script>name()</script>", json.dumps({"q": SCRIPT}), "<b>srv</b>", "ok", SCRIPT, 0.1)
    store.update_message_tool_steps(reply.id, (ToolStep(SCRIPT, (hostile, READ)),), "Done.")
    html = to_html(load_chats(store))
    assert "<script" not in html.lower() and "<img" not in html.lower() and "<b>srv" not in html
    assert html.count("&lt;script&gt;") >= 3  # the step's text, the call's name, its result
    assert "Called <code>read_file</code> (server files) · ok · 0.4 s" in html
    store.close()


# ---------------------------------------------------------------- hostile files


def _export_with_steps(steps: object, messages_after: int = 1) -> str:
    """A version 3 export: a chat whose second message carries `steps` as given, then good messages, and a
    second chat after it."""
    good = [s.to_dict() for s in STEPS]
    messages = [{"id": 1, "parent": None, "role": "user", "content": "Go", "tool_steps": []},
                {"id": 2, "parent": 1, "role": "assistant", "content": "Bad steps here", "tool_steps": steps}]
    messages += [{"id": 3 + i, "parent": 2 + i, "role": "assistant" if i % 2 else "user", "content": f"after {i}",
                  "tool_steps": good} for i in range(messages_after)]
    for m in messages:
        m.update({"reasoning": "", "reasoning_closed": True, "state": "complete", "stats": None, "created": 1.7e9})
    chat = {"id": "0f0e0d0c-0b0a-4908-8706-050403020100", "title": "Hostile", "created": 1.7e9, "updated": 1.7e9,
            "settings": {}, "folder": None, "pinned": False, "leaf": None, "messages": messages}
    second = {**chat, "id": "1f0e0d0c-0b0a-4908-8706-050403020100", "title": "After it", "messages": messages[:1]}
    return json.dumps({"format": "tailor-chats", "version": 3, "chats": [chat, second]})


HOSTILE = {
    "not a list": ("steps", "the tool steps must be a list, not str"),
    "a step of the wrong type": ([1], "step 1 must be an object, not int"),
    "an unknown status": ([{"text": "", "calls": [{**READ.to_dict(), "status": "exploded"}]}],
                          "step 1, call 1: \"status\" must be one of pending, running, ok, failed, denied, cancelled, "
                          "skipped, not 'exploded'"),
    "a number for a result": ([{"text": "", "calls": [{**READ.to_dict(), "result": 7}]}],
                              'step 1, call 1: "result" must be text, not 7'),
    "a huge name": ([{"text": "", "calls": [{**READ.to_dict(), "name": "n" * 1_000_000}]}],
                    'step 1, call 1: "name" is 1,000,000 characters long (at most 256 are read)'),
    "10^6 calls": ([{"text": "", "calls": [{}] * 1_000_000}],
                   f"1,000,000 tool calls in one reply (at most {MAX_CALLS:,} are read)"),
    "missing": (None, '"tool_steps" is missing'),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_steps_cost_their_message_its_steps_and_nothing_else(tmp_path: Path, case: str):
    steps, why = HOSTILE[case]
    text = _export_with_steps(steps)
    if steps is None:
        text = text.replace(', "tool_steps": null', "", 1)
    path = tmp_path / "chats.json"
    path.write_text(text, encoding="utf-8")
    store = ChatStore(tmp_path / "h.sqlite3")
    result = import_file(store, path)
    assert (result.imported, result.problems, result.error) == (["Hostile", "After it"], [], None)
    assert result.notes == [f"Mended chat 1 ('Hostile'): the tool steps of 1 message could not be read and were left "
                            f"out (message 2: {why})"]
    chat = next(c for c in store.list_conversations() if c.title == "Hostile")
    shown = store.list_messages(chat.id)
    assert [(m.content, m.tool_steps) for m in shown] == [("Go", ()), ("Bad steps here", ()), ("after 0", STEPS)]
    store.close()


def test_a_huge_result_imports_whole_as_a_message_s_content_would(tmp_path: Path):
    huge = "y" * 5_000_000
    path = tmp_path / "chats.json"
    path.write_text(_export_with_steps([{"text": "", "calls": [{**READ.to_dict(), "result": huge}]}]), encoding="utf-8")
    store = ChatStore(tmp_path / "h.sqlite3")
    result = import_file(store, path)
    assert result.notes == [] and result.imported == ["Hostile", "After it"]
    chat = next(c for c in store.list_conversations() if c.title == "Hostile")
    assert store.list_messages(chat.id)[1].tool_steps[0].calls[0].result == huge
    assert "… (4,998,000 more characters)" in to_markdown(load_chats(store, [chat.id]))
    store.close()


def test_several_bad_messages_make_one_note(tmp_path: Path):
    text = _export_with_steps("bad").replace('"content": "after 0", "tool_steps": [', '"content": "after 0", '
                                                                                     '"tool_steps": [7, ', 1)
    path = tmp_path / "chats.json"
    path.write_text(text, encoding="utf-8")
    store = ChatStore(tmp_path / "h.sqlite3")
    (note,) = import_file(store, path).notes
    assert note == ("Mended chat 1 ('Hostile'): the tool steps of 2 messages could not be read and were left out "
                    "(message 2: the tool steps must be a list, not str; …)")
    store.close()


# ---------------------------------------------------------------- the command line


def test_the_cli_exports_steps_readably_and_finds_chats_by_what_the_model_called(tmp_path: Path, capsys):
    db = tmp_path / "h.sqlite3"
    store, chat_id = tool_history(db)
    store.create_conversation("Other")
    store.close()
    assert main(["export", "--chat", str(chat_id), "--format", "md", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "Called `read_file` (server files) · ok · 0.4 s" in out and "Called `rm` (server shell) · denied" in out
    assert main(["chats", "ls", "--json", "--search", "read_file", "--db", str(db)]) == 0
    assert [c["title"] for c in json.loads(capsys.readouterr().out)["chats"]] == ["Tools"]
    assert main(["chats", "ls", "--json", "--search", "Denied by you", "--db", str(db)]) == 0  # a result: not searched
    assert json.loads(capsys.readouterr().out)["chats"] == []

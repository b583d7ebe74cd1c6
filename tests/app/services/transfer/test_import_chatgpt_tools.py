"""ChatGPT's tool calls and outputs become the tool steps of the reply they belong to, not dropped and not user text.

tests/fixtures/chatgpt/tool_calls.json is shaped as ChatGPT's export is: a reply that writes a line, browses
(a browsing display and a quote from it), thinks, runs Python twice (the second raises), then answers; a
regenerated version of it that calls DALL·E (arguments as JSON, an image as output); a hidden tool message
of the file browser; and the user's thanks after the first version, where `current_node` is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.services.history.store import ChatStore, ToolCallRecord, ToolStep
from app.services.history.tool_steps import MAX_CALLS
from app.services.transfer.export import load_chats, to_json
from app.services.transfer.import_chatgpt_tools import NO_OUTPUT
from app.services.transfer.importer import import_file
from tests.app.services.transfer.test_import_chatgpt import chatgpt_conversation, node
from tests.paths import FIXTURES

FIXTURE = FIXTURES / "chatgpt" / "tool_calls.json"
CALL = "c1000000-00{:02d}-4000-8000-0000000000{:02d}"


@pytest.fixture
def store(tmp_path: Path):
    store = ChatStore(tmp_path / "target.sqlite3")
    yield store
    store.close()


def _import(store: ChatStore, tmp_path: Path, conversations: list[dict]):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(conversations), encoding="utf-8")
    return import_file(store, path)


def test_a_reply_with_calls_is_one_message_whose_steps_hold_them(store: ChatStore):
    result = import_file(store, FIXTURE)
    assert (result.source, result.imported, result.problems, result.notes) == (
        "chatgpt", ["Lisbon weather, plotted"], [], [])
    (chat,) = store.list_conversations()
    messages = store.all_messages(chat.id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "What's the weather in Lisbon this week? Plot the highs."),
        ("assistant", "Sunny all week, with highs of 22–25 °C (IPMA). The chart is above."),
        ("user", "Thanks!"),
        ("assistant", "Here is Lisbon in the sun."),  # the regenerated version
    ]
    assert [m.content for m in store.list_messages(chat.id)][-1] == "Thanks!"  # current_node
    browse, plot, save = messages[1].tool_steps
    assert browse == ToolStep("Let me look that up first.", (ToolCallRecord(
        CALL.format(5, 5), "browser", json.dumps({"code": 'search("Lisbon weather forecast this week")'}), "", "ok",
        "# 【0†Lisbon 7-day forecast†www.ipma.pt】\nMon 24° Tue 25° Wed 23° Thu 22° Fri 24°\n\n"
        "IPMA forecast https://www.ipma.pt/en/\nSunny all week; highs 22 to 25 °C.", 2.5),))
    assert (plot.text, plot.reasoning) == ("", "A line of the five highs will do.")
    assert [(c.name, c.status, c.result, c.seconds) for c in (plot.calls[0], save.calls[0])] == [
        ("python", "ok", "<<ImageDisplayed>>", 1.5),
        ("python", "failed", "---------------------------------------------------------------------------\n"
                             "NameError                                 Traceback (most recent call last)\n"
                             "NameError: name 'out' is not defined", 0.25)]
    assert json.loads(plot.calls[0].arguments)["code"].startswith("import matplotlib.pyplot as plt\n")
    (dalle,) = messages[3].tool_steps
    assert dalle.calls == (ToolCallRecord(
        CALL.format(14, 14), "dalle.text2im",
        '{"prompt": "A sunny Lisbon street with a yellow tram, watercolour", "size": "1024x1024", "n": 1}', "", "ok",
        "[image]", 11.0),)
    everything = json.dumps([[m.content, [s.to_dict() for s in m.tool_steps]] for m in messages])
    assert "All the files uploaded" not in everything  # the hidden tool message stays out


def test_it_goes_on_to_tailors_json_and_back_unchanged(store: ChatStore, tmp_path: Path):
    import_file(store, FIXTURE)
    text = to_json(load_chats(store))
    path = tmp_path / "tailor.json"
    path.write_text(text, encoding="utf-8")
    other = ChatStore(tmp_path / "other.sqlite3")
    assert import_file(other, path).imported == ["Lisbon weather, plotted"]
    assert to_json(load_chats(other)) == text
    other.close()


def test_a_call_without_output_and_an_output_without_call(store: ChatStore, tmp_path: Path):
    chat = chatgpt_conversation("c-odd", "Odd", [
        node("root", None), node("u", "root", "user", "Go"),
        node("call", "u", "assistant", None, content={"content_type": "code", "text": "1/0"}, recipient="python"),
        node("a", "call", "assistant", "It never answered."),
        node("u2", "a", "user", "And now?"),
        node("out", "u2", "tool", "a stray output", author={"role": "tool", "name": "browser", "metadata": {}}),
        node("a2", "out", "assistant", "Fine."),
    ], current="a2")
    assert _import(store, tmp_path, [chat]).problems == []
    first, second = (m for m in store.list_messages(store.list_conversations()[0].id) if m.role == "assistant")
    assert first.tool_steps[0].calls == (ToolCallRecord("call", "python", '{"code": "1/0"}', "", "cancelled", NO_OUTPUT),)
    assert second.tool_steps[0].calls == (ToolCallRecord("out", "browser", "{}", "", "ok", "a stray output"),)
    assert [m.role for m in store.list_messages(store.list_conversations()[0].id)] == [
        "user", "assistant", "user", "assistant"]  # the output is no user's text


def test_a_reply_cut_after_a_call_ends_the_branch_at_that_reply_even_with_a_version_beside_it(store, tmp_path):
    chat = chatgpt_conversation("c-cut", "Cut", [
        node("root", None), node("u", "root", "user", "Go"),
        node("say", "u", "assistant", "Checking."),
        node("call", "say", "assistant", None, content={"content_type": "code", "text": "2+2"}, recipient="python"),
        node("out", "call", "tool", None, content={"content_type": "execution_output", "text": "4"}),
        node("other", "say", "user", "Never mind."),  # an edit of the conversation after the text, beside the call
    ], current="out")
    _import(store, tmp_path, [chat])
    cid = store.list_conversations()[0].id
    shown = store.list_messages(cid)
    assert [(m.role, m.content) for m in shown] == [("user", "Go"), ("assistant", "")]
    assert shown[1].tool_steps[0].text == "Checking." and shown[1].tool_steps[0].calls[0].result == "4"
    # The other path keeps the text as a reply of its own, before the user's message.
    assert [(m.role, m.content) for m in store.all_messages(cid)] == [
        ("user", "Go"), ("assistant", ""), ("assistant", "Checking."), ("user", "Never mind.")]


def test_calls_past_the_bound_are_left_out_with_a_note(store: ChatStore, tmp_path: Path):
    nodes = [node("root", None), node("u", "root", "user", "Loop")]
    parent = "u"
    for i in range(MAX_CALLS + 3):
        nodes.append(node(f"c{i}", parent, "assistant", None, content={"content_type": "code", "text": str(i)},
                          recipient="python"))
        nodes.append(node(f"o{i}", f"c{i}", "tool", str(i)))
        parent = f"o{i}"
    nodes.append(node("a", parent, "assistant", "Done."))
    result = _import(store, tmp_path, [chatgpt_conversation("c-loop", "Loop", nodes, current="a")])
    assert result.notes == ["Mended conversation 1 ('Loop'): 3 tool calls past the 1,000 a reply holds were left out"]
    reply = store.list_messages(store.list_conversations()[0].id)[-1]
    assert (reply.content, len(reply.tool_steps), reply.tool_steps[-1].calls[0].result) == ("Done.", MAX_CALLS, "999")

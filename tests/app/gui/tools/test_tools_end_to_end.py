"""The window with the real engine and a real MCP server: the starter model's weights under Qwen3's template
(which takes tools), in a chat that requires a tool call, call the echo server's tool; the permission bar asks,
Allow once runs it, the model's next request carries the result and the reply ends on it; the transcript, the
history and an export → import of the chat all hold the call and its result."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.gui.main_window import MainWindow
from app.services.history.store import ChatStore
from app.services.transfer.export import load_chats, to_json
from app.services.transfer.importer import import_file
from engine.protocol import ChatMessage, ReplyShape, SamplingParams
from tests.app.conftest import QUICK, with_load
from tests.paths import FIXTURES

ECHO = FIXTURES / "mcp_servers" / "echo_server.py"
WAIT_MS = 120_000  # the 135M model on two busy cores; a few seconds on a quiet machine
# Greedy and short; no thinking (Qwen3's template would think first); a context the echo server's tools fit;
# one tool step, so a model that called again would end its reply at once (its call skipped), never wait.
SETTINGS = with_load(replace(QUICK, max_tokens=48, reasoning="off", tool_step_cap=1), n_ctx=4096)


@pytest.fixture
def echo_configured(_tailor_home: Path) -> None:
    """The echo server in the window's MCP configuration (AppPaths.mcp_config under TAILOR_HOME)."""
    config = _tailor_home / "config"
    config.mkdir(parents=True, exist_ok=True)
    servers = {"echo": {"command": sys.executable, "args": [str(ECHO)]}}
    (config / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")


def _record_requests(window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[ChatMessage], ReplyShape]]:
    """What the window asks its engine to generate from now on: (messages, shape), in order."""
    engine, sent = window.session.model.engine, []
    generate = engine.generate

    def recording(messages: list[ChatMessage], sampling: SamplingParams, *, shape: ReplyShape | None = None,
                  **rest: object) -> int:
        sent.append((list(messages), shape or ReplyShape()))
        return generate(messages, sampling, shape=shape, **rest)

    monkeypatch.setattr(engine, "generate", recording)
    return sent


def _choose_in_tools_menu(window: MainWindow, starts_with: str) -> None:
    """Check an entry of the Tools button's menu, as a click on it does."""
    (action,) = [a for a in window.tools_button.menu().actions() if a.text().startswith(starts_with)]
    assert action.isEnabled() and not action.isChecked()
    action.trigger()


def test_a_required_call_is_asked_allowed_run_answered_kept_and_round_trips(
    qtbot, make_window, format_models: Callable[[str], Path], echo_configured: None, monkeypatch, tmp_path: Path
):
    window = make_window(settings=SETTINGS, model=format_models("qwen3"))
    _choose_in_tools_menu(window, "echo (")
    _choose_in_tools_menu(window, "Require a tool call")
    settings = window.session.current.settings
    assert (settings.tool_servers, settings.tool_choice) == (("echo",), "required")
    requests = _record_requests(window, monkeypatch)
    bar = window.permission_bar

    window.submit("Echo the word hello, then tell me what the tool said.")
    # Only a call of the model can show the bar: the server starting, the load and the stream never do.
    qtbot.waitUntil(lambda: bar.isVisible() and bar.current is not None, timeout=WAIT_MS)
    call = bar.current.call
    assert (call.name, call.server) == ("echo", "echo") and "<code>echo</code>" in bar.question.text()
    echoed = json.loads(call.arguments)["text"]
    assert bar.arguments.toPlainText() != "(no arguments)"
    (first_messages, first_shape), = requests
    assert first_shape.tool_choice == "required" and "echo" in first_shape.tools
    assert first_messages[-1].content == "Echo the word hello, then tell me what the tool said."

    # The real button, clicked at once: the bar ignores keys in its first moments (an Enter meant for the message
    # box), not a click.
    with qtbot.waitSignal(window.controller.stream_finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(bar.buttons["once"], Qt.MouseButton.LeftButton)
    reply = finished.args[0]
    assert not bar.isVisible()

    # The model's next request: the conversation, the call, its result as a tool turn; free to answer.
    assert len(requests) >= 2
    second_messages, second_shape = requests[1]
    assert second_shape.tool_choice == "auto"
    called, result = second_messages[-2], second_messages[-1]
    assert called.role == "assistant" and [c.name for c in called.tool_calls] == ["echo"]
    assert result.role == "tool" and result.tool_call_id == call.id and result.content == echoed

    # What the 135M model makes of the result is its own affair; that it wrote an answer after reading it is ours.
    assert reply.state == "complete" and reply.stats["tool_steps"] == 1 and "stopped_for" not in reply.stats
    assert reply.content.strip()
    card = window.chat.state.tool_cards[f"{reply.id}.0.0"]
    assert card.header().startswith("▸ Called echo (echo)")
    stored = window.session.store.get_message(reply.id)
    first_call = stored.tool_steps[0].calls[0]
    assert (first_call.id, first_call.name, first_call.status, first_call.result) == (call.id, "echo", "ok", echoed)
    assert stored.content == reply.content

    # Export the chat, import it into a fresh history: the steps come back as they were.
    path = tmp_path / "chats.json"
    path.write_text(to_json(load_chats(window.session.store)), encoding="utf-8")
    fresh = ChatStore(tmp_path / "fresh.sqlite3")
    try:
        imported = import_file(fresh, path)
        assert imported.error is None and imported.problems == [] and imported.notes == []
        (chat,) = fresh.list_conversations()
        (copy,) = [m for m in fresh.list_messages(chat.id) if m.role == "assistant"]
        assert (copy.tool_steps, copy.content) == (stored.tool_steps, stored.content)
        assert (chat.settings.tool_servers, chat.settings.tool_choice) == (("echo",), "required")
    finally:
        fresh.close()


def test_the_tools_menu_shows_each_chats_own_choice_and_keeps_what_is_checked(make_window, echo_configured: None):
    window = make_window(start=False)
    first = window.session.current.id
    other = window.session.store.create_conversation("Other").id
    _choose_in_tools_menu(window, "echo (")
    _choose_in_tools_menu(window, "Require a tool call")
    assert window.session.store.get_conversation(first).settings.tool_choice == "required"
    window.session.open_conversation(other)
    require = window.tools_button.require_action
    assert not require.isChecked() and not require.isEnabled() and window.tools_button.text() == "Tools"
    window.session.open_conversation(first)
    assert window.tools_button.require_action.isChecked() and window.tools_button.text() == "Tools · 1"

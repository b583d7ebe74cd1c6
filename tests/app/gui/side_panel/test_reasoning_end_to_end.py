"""The window with the real engine: the starter model's weights under QwQ's real template (its prompt
opens the think block) think into the reply's block, within the chat's thinking budget, then answer;
the starter model's own template has no reasoning and leaves the controls off."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.gui.side_panel.settings.reasoning_group import NO_REASONING
from tests.app.conftest import QUICK

WAIT_MS = 120_000
STORY = "Write a short story about a dragon who bakes bread."


def test_a_reasoning_model_thinks_into_the_block_then_answers_and_both_are_kept(
    qtbot, make_window, format_models: Callable[[str], Path]
):
    window = make_window(settings=replace(QUICK, max_tokens=48, think_budget=10), model=format_models("qwq"))
    group = window.settings_panel.reasoning_group
    assert group.reasoning.isEnabled() and group.budget.value() == 10  # QwQ's template reasons
    thoughts: list[str] = []
    window.controller.stream_reasoning.connect(lambda text, _tokens, _seconds: thoughts.append(text))
    with qtbot.waitSignal(window.controller.stream_finished, timeout=WAIT_MS) as finished:
        window.submit(STORY)
    reply = finished.args[0]
    assert thoughts and "".join(thoughts).strip()  # it streamed as reasoning, before the answer
    assert reply.reasoning.strip() and "</think>" not in reply.reasoning and reply.reasoning_closed
    assert reply.content.strip() and "<think>" not in reply.content and "</think>" not in reply.content
    tokens = reply.stats["reasoning_tokens"]
    assert 10 <= tokens <= 16  # the budget closed the think block
    block = window.chat.reasoning_blocks[reply.id]
    assert block.header.startswith("Thought for ") and block.header.endswith(f" · {tokens} tokens")
    assert not block.expanded and reply.content.split()[0] in window.chat.plain_text()
    assert f"{tokens} thinking + " in window.stats_label.text()
    stored = window.session.store.get_message(reply.id)
    assert (stored.content, stored.reasoning) == (reply.content, reply.reasoning)


def test_the_starter_models_own_template_has_no_reasoning(qtbot, window):
    group = window.settings_panel.reasoning_group
    assert not group.reasoning.isEnabled() and not group.budget.isEnabled()
    assert group.reasoning.toolTip() == NO_REASONING

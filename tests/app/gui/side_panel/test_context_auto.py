"""Context: Auto in the window, and the question asked before a chat that outgrows its context is sent.

Real widgets, the real engine with the starter model (trained for 8,192 tokens: on the CPU with a
few GiB of RAM free, the largest context that fits is all of it), a real SQLite file.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.gui.common.context_box import AUTO_TEXT
from app.gui.side_panel.settings.panel import SettingsPanel
from app.services.history.store import ChatSettings
from tests.app.conftest import QUICK, with_load

TIMEOUT_MS = 120_000
# Reloading and then prefilling ~2,200 tokens took over 120 s on two cores shared with other test runs
# (load average 6): the bound for that one wait.
PREFILL_TIMEOUT_MS = 400_000
AUTO = with_load(QUICK, n_ctx=None)
STARTER_TRAINED = 8192
# ~11,000 bytes of prose: about 2,200 tokens for the starter's tokenizer, more than a 2,048 context holds.
LONG_TEXT = "The quick brown fox jumps over the lazy dog while the farmer watches from the porch. " * 130


@pytest.fixture
def generate_calls(monkeypatch: pytest.MonkeyPatch):
    """Record, in order, each load and each generate request the window sends to the engine (the
    engine's own methods still run: these only note the calls)."""
    events: list[str] = []

    def watch(window) -> list[str]:
        engine, model = window.session.engine, window.session.model
        real_generate, real_load = engine.generate, model.request_load

        def generate(messages, sampling, **options):
            events.append("generate")
            return real_generate(messages, sampling, **options)

        def load(wanted):
            settings = wanted[1]
            events.append(f"load Auto up to {settings.auto_ctx_cap}" if settings.n_ctx is None else
                          f"load {settings.n_ctx}")
            return real_load(wanted)

        monkeypatch.setattr(engine, "generate", generate)
        monkeypatch.setattr(model, "request_load", load)
        return events

    return watch


def press_enter(qtbot, window, text: str) -> None:
    window.composer.setPlainText(text)
    window.composer.setFocus()
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)


def user_messages(window) -> list[str]:
    return [m.content for m in window.session.store.list_messages(window.session.current.id) if m.role == "user"]


def test_the_context_control_offers_auto_first_with_a_cap_that_counts_only_for_auto(qtbot):
    assert ChatSettings().load.n_ctx is None and ChatSettings().load.auto_ctx_cap == 32768  # a new chat is Auto
    panel = SettingsPanel()
    qtbot.addWidget(panel)
    assert panel.n_ctx.text() == AUTO_TEXT and panel.settings().load.n_ctx is None and panel.auto_cap.isEnabled()
    panel.n_ctx.stepBy(1)
    assert panel.settings().load.n_ctx == 2048 and not panel.auto_cap.isEnabled()
    panel.n_ctx.stepBy(3)
    assert panel.settings().load.n_ctx == 16384
    panel.set_settings(with_load(QUICK, n_ctx=None, auto_ctx_cap=65536))
    load = panel.settings().load
    assert load.n_ctx is None and load.auto_ctx_cap == 65536 and panel.auto_cap.isEnabled()
    assert panel.auto_cap.text() == "65,536 tokens"


def test_a_chat_on_auto_loads_the_planned_context_and_says_how_large_it_is(qtbot, make_window):
    window = make_window(start=False, settings=AUTO)
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS) as loaded:
        window.session.start()
    plan = window.session.plan
    n_ctx = loaded.args[0].info.n_ctx
    assert n_ctx == plan.context == min(plan.max_context, AUTO.load.auto_ctx_cap) == STARTER_TRAINED
    assert window.settings_panel.loaded_context.text() == "Context: Auto — 8,192 tokens"
    assert "fits up to 8,192 tokens" in window.plan_label.text()


def test_a_chat_that_outgrows_its_context_asks_before_sending_and_reloads_larger(
        qtbot, make_window, generate_calls):
    window = make_window(settings=with_load(AUTO, auto_ctx_cap=2048))  # Auto, capped at 2,048 tokens
    events = generate_calls(window)
    assert window.settings_panel.loaded_context.text() == "Context: Auto — 2,048 tokens"
    press_enter(qtbot, window, LONG_TEXT)
    dialog = window.context_prompt.dialog
    assert dialog is not None and dialog.isVisible()
    assert "2,048" in dialog.text() and "8,192" in dialog.informativeText()
    assert dialog.reload_button.text() == "Reload with 8,192 tokens"
    assert events == [] and user_messages(window) == []  # nothing went to the engine, nothing was stored
    assert window.composer.toPlainText() == LONG_TEXT

    with (
        qtbot.waitSignal(window.controller.loaded, timeout=PREFILL_TIMEOUT_MS) as loaded,
        qtbot.waitSignal(window.controller.stream_finished, timeout=PREFILL_TIMEOUT_MS) as finished,
    ):
        dialog.reload_button.click()
    assert events == ["load Auto up to 8192", "generate"]  # reloaded with the larger context, then sent
    assert loaded.args[0].info.n_ctx == 8192
    assert finished.args[0].state == "complete" and finished.args[0].content, window.banner.text()
    assert finished.args[0].stats["prompt_tokens"] > 2048  # it really did not fit before
    assert user_messages(window) == [LONG_TEXT.strip()] and window.composer.toPlainText() == ""
    stored = window.session.store.get_conversation(window.session.current.id).settings.load
    assert (stored.n_ctx, stored.auto_ctx_cap) == (None, 8192)  # still Auto, its cap raised
    assert window.settings_panel.auto_cap.value() == 8192
    assert window.settings_panel.loaded_context.text() == "Context: Auto — 8,192 tokens"


def test_when_even_the_largest_context_is_too_small_only_a_new_chat_is_offered(
        qtbot, make_window, generate_calls):
    window = make_window(start=False, settings=with_load(QUICK, n_ctx=1024))
    events = generate_calls(window)
    first = window.session.current.id
    huge = LONG_TEXT * 4  # ~8,800 tokens: more than the 8,192 the starter model was trained for
    press_enter(qtbot, window, huge)
    dialog = window.context_prompt.dialog
    assert dialog is not None and dialog.reload_button is None
    assert "1,024" in dialog.text() and "8,192 tokens) is too small" in dialog.informativeText()
    assert [b.text() for b in dialog.buttons() if b is not dialog.cancel_button] == ["New chat"]
    qtbot.mouseClick(dialog.new_chat_button, Qt.MouseButton.LeftButton)
    assert window.session.current.id != first  # a new chat is open
    assert window.composer.toPlainText() == huge  # with the message still in the box
    assert events == [] and window.session.store.list_messages(first) == [] and user_messages(window) == []
    assert not dialog.isVisible()

"""The window's reasoning controls and display over a scripted engine: the settings panel's choice
and budget reach the engine with each reply, only a model that reasons enables them, and reasoning
Tokens from another thread stream into the chat's block (real widgets offscreen, a real store)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication

from app.gui.chat_controller import ChatController
from app.gui.main_window import MainWindow
from app.gui.side_panel.settings.panel import SettingsPanel
from app.gui.side_panel.settings.reasoning_group import NO_MODEL, NO_REASONING
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.protocol import Done, GenerationStats, ModelInfo, ReplyShape, Token
from engine.starter import starter_model_path
from models.hardware.profile import profile_for
from tests.fixtures.fake_engine import FakeEngine

WAIT_MS = 10_000
STATS = GenerationStats(ttft_s=0.05, prompt_tokens=40, cached_tokens=0, gen_tokens=45, prefill_tok_s=200.0,
                        decode_tok_s=25.0, reasoning_tokens=40, reasoning_s=3.4)


def info(reasoning_format: str | None) -> ModelInfo:
    return ModelInfo("/m/model.gguf", "Model", "qwen3", 2048, 32768, 1, 1, True, reasoning_format=reasoning_format)


def test_the_panel_enables_reasoning_only_for_a_model_that_reasons_and_writes_the_settings(qtbot):
    panel = SettingsPanel()
    qtbot.addWidget(panel)
    group = panel.reasoning_group
    panel.set_settings(ChatSettings())
    assert not group.reasoning.isEnabled() and not group.budget.isEnabled()
    assert group.reasoning.toolTip() == NO_MODEL  # nothing loaded yet
    panel.show_model_info(info(None))
    assert not group.reasoning.isEnabled() and group.reasoning.toolTip() == NO_REASONING
    assert group.budget.toolTip() == NO_REASONING
    panel.show_model_info(info("think"))
    assert group.reasoning.isEnabled() and group.budget.isEnabled()
    labels = [group.reasoning.itemText(i) for i in range(group.reasoning.count())]
    assert labels == ["Auto", "On", "Off", "Low effort", "Medium effort", "High effort"]
    assert group.budget.text() == "No cap"  # 0 is no cap
    with qtbot.waitSignal(panel.settings_changed, timeout=WAIT_MS) as changed:
        group.reasoning.setCurrentIndex(labels.index("High effort"))
        group.budget.setValue(1024)
    assert (changed.args[0].reasoning, changed.args[0].think_budget) == ("high", 1024)
    group.reasoning.setCurrentIndex(labels.index("Off"))
    assert not group.budget.isEnabled()  # no budget for no thinking
    group.reasoning.setCurrentIndex(labels.index("On"))
    group.budget.setValue(0)
    assert (panel.settings().reasoning, panel.settings().think_budget) == ("on", None)
    panel.set_settings(ChatSettings(reasoning="low", think_budget=300))  # another chat's
    assert (group.reasoning.currentText(), group.budget.value()) == ("Low effort", 300)


class Scripted:
    """A MainWindow over a FakeEngine: the engine's events are handed to the controller's `deliver`
    from a thread of its own, as the EngineClient's reader thread does."""

    def __init__(self, qtbot, tmp_path: Path, reasoning_format: str | None):
        self.qtbot = qtbot
        self.engine = FakeEngine(reasoning_format=reasoning_format)
        self.store = ChatStore(tmp_path / "chats.sqlite3")
        planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)

        def make_engine(deliver):
            self.engine.handle = deliver
            return self.engine

        self.controller = ChatController(self.store, str(starter_model_path()), planner, make_engine)
        self.window = MainWindow(self.controller)
        qtbot.addWidget(self.window)
        self.window.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=2048)))
        self.window.settings_panel.set_settings(ChatSettings(load=LoadSettings(n_ctx=2048)))
        with qtbot.waitSignal(self.controller.loaded, timeout=WAIT_MS):
            self.window.session.start()
            self.pump()

    def pump(self) -> None:
        """Hand the engine's queued events over from another thread."""
        thread = threading.Thread(target=self.engine.pump)
        thread.start()
        thread.join()

    def send(self, text: str) -> int:
        with self.qtbot.waitSignal(self.controller.stream_started, timeout=WAIT_MS):
            self.window.submit(text)  # the model is loaded: the reply starts at once
        return self.engine.last_request

    def close(self) -> None:
        self.window.close()
        self.store.close()


@pytest.fixture
def scripted(qtbot, tmp_path):
    made: list[Scripted] = []

    def make(reasoning_format: str | None = "think") -> Scripted:
        made.append(Scripted(qtbot, tmp_path, reasoning_format))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_the_settings_reach_the_engine_with_the_next_reply(qtbot, scripted):
    chat = scripted("think")
    group = chat.window.settings_panel.reasoning_group
    assert group.reasoning.isEnabled()  # the loaded model's template reasons
    group.reasoning.setCurrentIndex(group.reasoning.findData("medium"))
    group.budget.setValue(512)
    request_id = chat.send("What is 17 * 23?")
    assert chat.engine.shapes[request_id] == ReplyShape(reasoning="medium", think_budget=512)
    assert chat.store.get_conversation(chat.window.session.current.id).settings.think_budget == 512


def test_a_model_without_reasoning_disables_the_controls(qtbot, scripted):
    chat = scripted(None)
    group = chat.window.settings_panel.reasoning_group
    assert not group.reasoning.isEnabled() and not group.budget.isEnabled()
    assert group.reasoning.toolTip() == "This model's chat template has no reasoning."


def test_reasoning_from_the_engine_thread_streams_into_the_block_and_copy_gives_the_answer(qtbot, scripted):
    chat = scripted("think")
    request_id = chat.send("What is 17 * 23?")
    view = chat.window.chat
    pieces = [f" step {i}" for i in range(1, 41)]
    chat.engine.say(*(Token(request_id, p, reasoning=True) for p in pieces))
    chat.pump()
    qtbot.waitUntil(lambda: any(b.text.endswith("step 40") for b in view.reasoning_blocks.values()), timeout=WAIT_MS)
    (block,) = view.reasoning_blocks.values()
    qtbot.waitUntil(lambda: "40 tokens" in block.header, timeout=WAIT_MS)
    assert block.header.startswith("Thinking… ") and not block.expanded
    chat.engine.stream(request_id, "It is ", "391.")
    chat.engine.say(Done(request_id, "It is 391.", "stop", STATS, reasoning="".join(pieces)))
    with qtbot.waitSignal(chat.controller.stream_finished, timeout=WAIT_MS):
        chat.pump()
    assert block.header == "Thought for 3 s · 40 tokens"
    assert "40 thinking + 5 answer tokens" in chat.window.stats_label.text()
    chat.window.copy_last_reply()
    assert QGuiApplication.clipboard().text() == "It is 391."
    # Opened again (another chat, then this one): the block comes from the store, collapsed.
    first = chat.window.session.current.id
    chat.window.new_conversation()
    chat.window.session.open_conversation(first)
    (block,) = view.reasoning_blocks.values()
    assert block.header == "Thought for 3 s · 40 tokens" and block.text == "".join(pieces) and not block.expanded
    assert "step 40" not in view.plain_text() and "It is 391." in view.plain_text()

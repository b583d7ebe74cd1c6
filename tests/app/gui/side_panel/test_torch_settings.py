"""The window's load settings of speculative decoding (the mode, the draft model: both engines) and
of the PyTorch engine (the KV memory).

Real widgets offscreen, the real SQLite store, and (for the end-to-end tests) the real engine
process running tiny model folders written by tests/fixtures/tiny_hf.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.chat.load_settings import load_settings_of
from app.gui.side_panel.settings.panel import SettingsPanel
from app.gui.side_panel.settings.speculation_group import NO_DRAFT_HINT
from app.gui.side_panel.settings.torch_settings_group import GIB
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from models.plan.load_options import SpeculativeOptions, TorchOptions
from tests.app.conftest import QUICK, record_loads

TIMEOUT_MS = 120_000
DIALOG = "app.gui.side_panel.settings.speculation_group.QFileDialog.getExistingDirectory"
FILE_DIALOG = "app.gui.side_panel.settings.speculation_group.QFileDialog.getOpenFileName"


@pytest.fixture
def panel(qtbot) -> SettingsPanel:
    panel = SettingsPanel()
    qtbot.addWidget(panel)
    panel.set_settings(ChatSettings())  # as the window does when it opens a chat
    return panel


def _model_folder(path: Path) -> Path:
    """A folder the window takes for a model folder (config.json); enough for the settings panel."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    return path


def _emitted(qtbot, panel: SettingsPanel, change) -> ChatSettings:
    with qtbot.waitSignal(panel.settings_changed, timeout=2000) as sent:
        change()
    return sent.args[0]


# ---------------------------------------------------------------- the controls, without an engine


def test_the_group_is_shown_only_for_a_model_folder(panel: SettingsPanel, tmp_path: Path, starter_model: Path):
    def llama_cpp_rows_shown() -> bool:
        return all(panel._form.isRowVisible(w) for w in (panel.kv_type, panel.flash_attn))

    panel.set_model_path(str(starter_model))
    assert panel.torch_group.isHidden() and llama_cpp_rows_shown()
    assert not panel.speculation_group.isHidden()  # both engines decode speculatively
    # A model folder: the PyTorch engine's settings, and not llama.cpp's KV type and flash attention.
    panel.set_model_path(str(_model_folder(tmp_path / "tiny")))
    assert not panel.torch_group.isHidden() and not panel.speculation_group.isHidden()
    assert not any(panel._form.isRowVisible(w) for w in (panel.kv_type, panel.flash_attn))
    panel.set_model_path(str(tmp_path / "not-there"))
    assert panel.torch_group.isHidden() and llama_cpp_rows_shown()
    assert not panel.speculation_group.isHidden()


def test_each_control_changes_the_chat_and_load_settings(qtbot, panel: SettingsPanel, tmp_path: Path, monkeypatch):
    group, spec = panel.torch_group, panel.speculation_group
    panel.set_model_path(str(_model_folder(tmp_path / "model")))  # its draft is a folder
    assert panel.settings() == ChatSettings()  # the defaults: auto, no draft, 90 %, CPU budget Auto
    assert group.cpu_kv.text() == "Auto" and group.gpu_share.value() == 90

    settings = _emitted(qtbot, panel, lambda: spec.speculative.setCurrentIndex(spec.speculative.findData("lookup")))
    assert settings.load.speculation.mode == "lookup"
    assert load_settings_of(settings).speculation.mode == "lookup"
    # A changed setting is a changed LoadSettings: the runner reloads the model for it.
    assert load_settings_of(settings) != load_settings_of(ChatSettings())

    settings = _emitted(qtbot, panel, lambda: group.gpu_share.setValue(75))
    assert settings.load.torch.gpu_memory_fraction == 0.75
    assert load_settings_of(settings).torch.gpu_memory_fraction == 0.75

    settings = _emitted(qtbot, panel, lambda: group.cpu_kv.setValue(2.5))
    assert settings.load.torch.cpu_kv_bytes == int(2.5 * GIB)
    assert load_settings_of(settings).torch.cpu_kv_bytes == int(2.5 * GIB)
    settings = _emitted(qtbot, panel, lambda: group.cpu_kv.setValue(0))
    assert settings.load.torch.cpu_kv_bytes is None and group.cpu_kv.text() == "Auto"
    group.cpu_kv.setValue(0.1)  # typed under the minimum: it becomes the minimum
    group.cpu_kv.editingFinished.emit()
    assert group.cpu_kv.value() == 0.25 and panel.settings().load.torch.cpu_kv_bytes == GIB // 4

    draft = _model_folder(tmp_path / "draft")
    monkeypatch.setattr(DIALOG, lambda *a, **k: str(draft))
    spec.speculative.setCurrentIndex(spec.speculative.findData("draft"))
    settings = _emitted(qtbot, panel, spec.browse.click)
    assert settings.load.speculation.mode == "draft" and settings.load.speculation.draft_path == str(draft)
    assert load_settings_of(settings).torch == TorchOptions(gpu_memory_fraction=0.75, cpu_kv_bytes=GIB // 4)
    assert load_settings_of(settings).speculation == SpeculativeOptions(mode="draft", draft_path=str(draft))
    # Another mode keeps the folder for later, but the load asks for no draft (the engine refuses one).
    settings = _emitted(qtbot, panel, lambda: spec.speculative.setCurrentIndex(spec.speculative.findData("off")))
    assert settings.load.speculation.draft_path == str(draft)
    assert load_settings_of(settings).speculation.draft_path is None
    # Shown again exactly as stored.
    panel.set_settings(ChatSettings())
    panel.set_settings(settings)
    assert panel.settings() == settings


def test_speculation_reloads_either_model_and_torch_settings_only_a_folder(tmp_path: Path, starter_model: Path):
    folder, gguf = str(_model_folder(tmp_path / "folder")), str(starter_model)
    plain = ChatSettings()
    lookup = ChatSettings(load=LoadSettings(speculation=SpeculativeOptions(mode="lookup")))
    memory = ChatSettings(load=LoadSettings(torch=TorchOptions(gpu_memory_fraction=0.5)))
    for path in (folder, gguf):  # both engines decode speculatively: switching chats reloads either
        assert load_settings_of(plain, (), path) != load_settings_of(lookup, (), path)
        assert load_settings_of(lookup, (), path).speculation.mode == "lookup"
    assert load_settings_of(plain, (), folder) != load_settings_of(memory, (), folder)
    # Two chats that differ only in PyTorch settings share one load of a GGUF model.
    assert load_settings_of(plain, (), gguf) == load_settings_of(memory, (), gguf)
    assert load_settings_of(memory, (), gguf).torch == TorchOptions()
    # The draft counts only while "Draft model" is chosen, for a GGUF model too.
    kept = ChatSettings(load=LoadSettings(speculation=SpeculativeOptions("lookup", "/models/draft.gguf")))
    assert load_settings_of(kept, (), gguf) == load_settings_of(lookup, (), gguf)
    drafted = ChatSettings(load=LoadSettings(speculation=SpeculativeOptions("draft", "/models/draft.gguf")))
    assert load_settings_of(drafted, (), gguf).speculation.draft_path == "/models/draft.gguf"


def test_the_draft_folder_is_enabled_only_for_a_draft_model(panel: SettingsPanel):
    group = panel.speculation_group
    for value in ("auto", "off", "lookup"):
        group.speculative.setCurrentIndex(group.speculative.findData(value))
        assert not group.browse.isEnabled() and not group.draft_path.isEnabled()
        assert group.message.isHidden()
    group.speculative.setCurrentIndex(group.speculative.findData("draft"))
    assert group.browse.isEnabled() and group.draft_path.isEnabled()
    assert group.message.text() == NO_DRAFT_HINT and not group.message.isHidden()
    group.speculative.setCurrentIndex(group.speculative.findData("off"))
    assert group.message.isHidden()


def test_a_folder_that_is_not_a_model_is_refused_and_nothing_changes(
    qtbot, panel: SettingsPanel, tmp_path: Path, monkeypatch
):
    group = panel.speculation_group
    panel.set_model_path(str(_model_folder(tmp_path / "model")))  # its draft is a folder
    good = _model_folder(tmp_path / "draft")
    monkeypatch.setattr(DIALOG, lambda *a, **k: str(good))
    group.speculative.setCurrentIndex(group.speculative.findData("draft"))
    _emitted(qtbot, panel, group.browse.click)
    before = panel.settings()
    photos = tmp_path / "photos"
    photos.mkdir()
    monkeypatch.setattr(DIALOG, lambda *a, **k: str(photos))
    with qtbot.assertNotEmitted(panel.settings_changed, wait=500):
        group.browse.click()
    assert group.message.text() == "photos is not a model folder (it has no config.json): the draft model is unchanged."
    assert not group.message.isHidden()
    assert panel.settings() == before and group.draft_path.text() == str(good)
    monkeypatch.setattr(DIALOG, lambda *a, **k: "")  # cancelled: nothing at all
    with qtbot.assertNotEmitted(panel.settings_changed, wait=500):
        group.browse.click()
    assert panel.settings() == before


def test_a_gguf_model_takes_a_gguf_draft_and_refuses_anything_else(
    qtbot, panel: SettingsPanel, tmp_path: Path, starter_model: Path, monkeypatch
):
    group = panel.speculation_group
    panel.set_model_path(str(starter_model))
    draft = tmp_path / "tiny-draft.gguf"
    draft.write_bytes(b"GGUF")  # the panel checks the kind; the engine reads the file
    asked = []

    def pick(path: Path):
        def dialog(*args, **kwargs):
            asked.append(args[-1])  # the file filter: a GGUF model's draft is a file, not a folder
            return str(path), ""
        return dialog

    monkeypatch.setattr(FILE_DIALOG, pick(draft))
    monkeypatch.setattr(DIALOG, lambda *a, **k: pytest.fail("a GGUF model's draft is not a folder"))
    group.speculative.setCurrentIndex(group.speculative.findData("draft"))
    settings = _emitted(qtbot, panel, group.browse.click)
    assert asked == ["GGUF models (*.gguf)"]
    assert settings.load.speculation == SpeculativeOptions(mode="draft", draft_path=str(draft))
    assert load_settings_of(settings, (), str(starter_model)).speculation.draft_path == str(draft)
    before = panel.settings()
    for wrong in (_model_folder(tmp_path / "folder-draft"), tmp_path / "notes.txt", tmp_path / "gone.gguf"):
        if wrong.suffix == ".txt":
            wrong.write_text("not a model")
        monkeypatch.setattr(FILE_DIALOG, pick(wrong))
        with qtbot.assertNotEmitted(panel.settings_changed, wait=300):
            group.browse.click()
        assert group.message.text() == f"{wrong.name} is not a .gguf file: the draft model is unchanged."
        assert panel.settings() == before


def test_the_settings_round_trip_through_the_store(tmp_path: Path):
    settings = ChatSettings(load=LoadSettings(
        speculation=SpeculativeOptions(mode="draft", draft_path="/models/tiny-draft"),
        torch=TorchOptions(gpu_memory_fraction=0.6, cpu_kv_bytes=3 * GIB)))
    store = ChatStore(tmp_path / "chats.sqlite3")
    conversation = store.create_conversation("Drafted", settings)
    off = ChatSettings(load=LoadSettings(speculation=SpeculativeOptions(mode="off")))
    store.update_settings(store.create_conversation().id, off)
    store.close()
    store = ChatStore(tmp_path / "chats.sqlite3")
    try:
        assert store.get_conversation(conversation.id).settings == settings
        speculative = [c.settings.load.speculation.mode for c in store.list_conversations()]
        assert speculative in (["off", "draft"], ["draft", "off"])
    finally:
        store.close()
    # Settings saved before these fields existed get the defaults.
    old = ChatSettings.from_json(json.dumps({"n_ctx": 2048, "kv_type": "q8_0"}))
    options, spec = old.load.torch, old.load.speculation
    assert (spec.mode, spec.draft_path, options.gpu_memory_fraction, options.cpu_kv_bytes) == (
        "auto", None, 0.9, None)
    assert load_settings_of(old) == LoadSettings(2048, "q8_0")


def test_chats_stored_by_the_last_release_keep_their_torch_options():
    # A conversations.settings value exactly as the release before TorchOptions wrote it: flat keys.
    stored = (
        '{"system_prompt": "Be brief.", "temperature": 0.7, "top_p": 0.95, "max_tokens": 512, "n_ctx": null, '
        '"auto_ctx_cap": 32768, "kv_type": "f16", "flash_attn": "auto", "speculative": "draft", '
        '"draft_path": "/models/tiny-draft", "gpu_memory_fraction": 0.6, "cpu_kv_bytes": 3221225472}'
    )
    settings = ChatSettings.from_json(stored)
    assert settings == ChatSettings(
        system_prompt="Be brief.",
        load=LoadSettings(n_ctx=None, speculation=SpeculativeOptions(mode="draft", draft_path="/models/tiny-draft"),
                          torch=TorchOptions(gpu_memory_fraction=0.6, cpu_kv_bytes=3 * GIB)),
    )
    # Written back flat, with every key the release wrote and the same values: it still reads them.
    written = json.loads(settings.to_json())
    assert written == {**json.loads(stored), "speculative_tokens": None, "reasoning": "auto", "think_budget": None,
                       "tool_servers": [], "allowed_tools": [], "tool_step_cap": 10, "tool_choice": "auto",
                       "document_budget": None, "knowledge": None}
    assert ChatSettings.from_json(settings.to_json()) == settings
    tokens = ChatSettings(load=LoadSettings(speculation=SpeculativeOptions(mode="lookup", tokens=3)))
    assert ChatSettings.from_json(tokens.to_json()) == tokens
    assert json.loads(tokens.to_json())["speculative_tokens"] == 3


# ---------------------------------------------------------------- in the window, with the engine


@pytest.fixture
def tiny_folders(tmp_path: Path) -> dict[str, Path]:
    """A tiny model, a draft that shares its tokenizer, and one whose tokenizer has a token more."""
    pytest.importorskip("torch")
    from tokenizers import Tokenizer

    from tests.fixtures.tiny_hf import write_tiny_model

    folders = {name: tmp_path / name for name in ("tiny-llama", "tiny-draft", "other-draft")}
    write_tiny_model(folders["tiny-llama"], "llama")
    write_tiny_model(folders["tiny-draft"], "llama", seed=1, num_hidden_layers=1)
    write_tiny_model(folders["other-draft"], "llama", seed=2, num_hidden_layers=1)
    tokenizer = Tokenizer.from_file(str(folders["other-draft"] / "tokenizer.json"))
    tokenizer.add_tokens(["<|draft-only|>"])
    tokenizer.save(str(folders["other-draft"] / "tokenizer.json"))
    return folders


def _choose(window, qtbot, value: str) -> None:
    """Pick a speculative mode in the panel and wait until the chat's settings have it."""
    group, session = window.settings_panel.speculation_group, window.session
    group.speculative.setCurrentIndex(group.speculative.findData(value))
    qtbot.waitUntil(lambda: session.store.get_conversation(session.current.id).settings.load.speculation.mode
                    == value, timeout=2000)


def _send(window, qtbot, text: str):
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        window.submit(text)
    return finished.args[0]


def test_prompt_lookup_reloads_the_folder_model_and_the_chat_answers(
    qtbot, make_window, tiny_folders, monkeypatch, starter_model: Path
):
    window = make_window()  # the starter GGUF: the PyTorch engine's settings are not shown
    panel = window.settings_panel
    assert panel.torch_group.isHidden()
    requests = record_loads(window, monkeypatch)
    folder = tiny_folders["tiny-llama"]
    monkeypatch.setattr("app.gui.model_picker.picker.QFileDialog.getExistingDirectory", lambda *a, **k: str(folder))
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
        window.open_folder_action.trigger()
    assert panel.torch_group.isVisible()
    # Exactly one load, of the folder: the picker plans the library's verdicts meanwhile and loads nothing.
    assert [(r.path, r.speculation) for r in requests] == [(str(folder), SpeculativeOptions(mode="auto"))]
    assert _send(window, qtbot, "Hello there").state == "complete", window.banner.text()

    _choose(window, qtbot, "lookup")
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS) as loaded:
        reply = _send(window, qtbot, "Say it again")
    assert loaded.args[0].info.path == str(folder)
    assert [(r.path, r.speculation) for r in requests[1:]] == [(str(folder), SpeculativeOptions(mode="lookup"))]
    assert reply.state == "complete" and reply.stats["gen_tokens"] > 0, window.banner.text()
    assert len(window.session.store.list_messages(window.session.current.id)) == 4

    # Back to a GGUF file: the group goes.
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
        window.session.load_model(str(starter_model))
    assert panel.torch_group.isHidden()


def test_a_draft_with_another_tokenizer_is_refused_and_the_chat_is_kept(
    qtbot, make_window, tiny_folders, monkeypatch
):
    window = make_window(model=tiny_folders["tiny-llama"], settings=QUICK)
    controller, session, group = window.controller, window.session, window.settings_panel.speculation_group
    torch_group = window.settings_panel.torch_group
    assert torch_group.isVisible() and group.isVisible()
    requests = record_loads(window, monkeypatch)
    first = _send(window, qtbot, "Hello there")
    assert first.state == "complete", window.banner.text()

    _choose(window, qtbot, "draft")
    # "Draft model" with no folder chosen yet: the engine says what is missing.
    with qtbot.waitSignal(controller.problem, timeout=TIMEOUT_MS) as problem:
        window.submit("And now with a draft")
    assert "needs the draft model's folder" in problem.args[0], problem.args[0]
    assert not session.busy

    monkeypatch.setattr(DIALOG, lambda *a, **k: str(tiny_folders["other-draft"]))
    group.browse.click()
    qtbot.waitUntil(lambda: session.current.settings.load.speculation.draft_path == str(tiny_folders["other-draft"]),
                    timeout=2000)
    with qtbot.waitSignal(controller.problem, timeout=TIMEOUT_MS) as problem:
        assert session.regenerate()  # answers the message again, loading with this draft
        window.composer.setPlainText("typed while it loaded")
    # One load per answer asked for: "Draft model" without a folder (refused), then with the other tokenizer.
    assert [(r.path, r.speculation) for r in requests] == [
        (str(tiny_folders["tiny-llama"]), SpeculativeOptions(mode="draft")),
        (str(tiny_folders["tiny-llama"]), SpeculativeOptions(mode="draft", draft_path=str(tiny_folders["other-draft"]))),
    ]
    message = problem.args[0]
    assert "other-draft has another tokenizer" in message and "share the model's tokenizer" in message
    assert window.banner.isVisible() and window.banner.text() == message
    assert not session.busy and torch_group.isVisible()  # still the folder model: the draft can be fixed here
    texts = [(m.role, m.content) for m in session.store.list_messages(session.current.id)]
    assert texts == [("user", "Hello there"), ("assistant", first.content), ("user", "And now with a draft")]
    assert "Hello there" in window.chat.plain_text() and "And now with a draft" in window.chat.plain_text()
    assert window.composer.toPlainText() == "typed while it loaded"

    # A draft that shares the tokenizer: the same question is answered, with the drafts' acceptance.
    monkeypatch.setattr(DIALOG, lambda *a, **k: str(tiny_folders["tiny-draft"]))
    group.browse.click()
    qtbot.waitUntil(lambda: session.current.settings.load.speculation.draft_path == str(tiny_folders["tiny-draft"]),
                    timeout=2000)
    with qtbot.waitSignal(controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        assert session.regenerate()
    reply = finished.args[0]
    assert reply.state == "complete", window.banner.text()
    assert [(r.path, r.speculation) for r in requests[2:]] == [
        (str(tiny_folders["tiny-llama"]), SpeculativeOptions(mode="draft", draft_path=str(tiny_folders["tiny-draft"])))]
    assert 0.0 <= reply.stats["draft_acceptance"] <= 1.0

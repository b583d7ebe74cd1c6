"""A load's progress and its cancel, as the session sees them, against a scripted engine."""

from __future__ import annotations

from pathlib import Path

from engine.protocol import LoadProgress


def other_model(tmp_path: Path) -> str:
    path = tmp_path / "Other-7B.Q4_K_M.gguf"  # never read: the scripted engine loads any path
    path.write_bytes(b"GGUF")
    return str(path)


def test_the_progress_of_a_load_reaches_the_listener_until_it_ends(chat):
    chat.engine.hold_loads = True
    chat.session.start()
    chat.engine.progress(0.0)
    chat.engine.progress(0.4)
    chat.engine.progress(1.0, "context")
    chat.engine.pump()
    assert chat.heard.of("load_progress") == [(0.0, "reading"), (0.4, "reading"), (1.0, "context")]
    chat.engine.finish_load()
    chat.engine.pump()
    assert chat.session.model.loaded is not None
    chat.engine.say(LoadProgress(1.0, "context"))  # late, from a load that has ended: not shown
    chat.engine.pump()
    assert len(chat.heard.of("load_progress")) == 3


def test_a_cancelled_load_goes_back_to_the_model_loaded_before(chat, tmp_path):
    chat.started()
    first = chat.session.model.loaded
    chat.engine.hold_loads = True
    other = other_model(tmp_path)
    assert chat.session.load_model(other)
    assert chat.engine.loads[-1].path == other and chat.session.model.loading is not None
    chat.heard.clear()
    assert chat.session.cancel_load()
    assert chat.engine.load_cancels == 1 and chat.heard.last("model_changed") == ("Cancelling Other-7B.Q4_K_M.gguf …",)
    chat.engine.pump()  # the engine's load_cancelled: the model before is asked for again, as it was loaded
    assert chat.session.model_path == first[0] and chat.session.model.loading == first
    assert chat.engine.loads[-1].path == first[0] and chat.engine.loads[-1].n_ctx == 2048
    (notice,) = chat.heard.last("notice")
    assert notice == f"Loading Other-7B.Q4_K_M.gguf was cancelled; loading {Path(first[0]).name} again."
    assert not chat.heard.of("problem")  # a cancel is no error
    chat.engine.finish_load()
    chat.engine.pump()
    assert chat.session.model.loaded == first


def test_a_cancelled_first_load_leaves_no_model_and_the_message_waiting_for_it_unanswered(chat):
    chat.engine.hold_loads = True
    chat.session.start()
    assert chat.session.send("Hello?")  # waits for the model
    assert chat.session.busy
    assert chat.session.cancel_load()
    chat.engine.pump()
    assert chat.heard.last("model_changed") == ("No model loaded",)
    (notice,) = chat.heard.last("notice")
    assert notice.endswith("was cancelled; no model is loaded.")
    assert not chat.session.busy and chat.heard.last("busy_changed") == (False,) and not chat.engine.prompts
    assert [m.role for m in chat.store.list_messages(chat.session.current.id)] == ["user"]  # the message is kept
    assert len(chat.engine.loads) == 1  # nothing to go back to: no load follows
    assert chat.session.send("Hello again?")  # the next message loads the model afresh
    assert len(chat.engine.loads) == 2


def test_cancelling_the_way_back_leaves_no_model(chat, tmp_path):
    chat.started()
    chat.engine.hold_loads = True
    chat.session.load_model(other_model(tmp_path))
    chat.session.cancel_load()
    chat.engine.pump()  # going back to the first model
    assert chat.session.cancel_load()
    chat.engine.pump()
    assert chat.heard.last("model_changed") == ("No model loaded",) and chat.session.model.loading is None
    assert len(chat.engine.loads) == 3


def test_a_load_that_ended_before_the_cancel_arrived_stays_loaded(chat, tmp_path):
    chat.started()
    chat.engine.hold_loads = True
    other = other_model(tmp_path)
    chat.session.load_model(other)
    chat.engine.finish_load()  # the Loaded is on its way when Cancel is pressed
    assert chat.session.cancel_load()
    chat.engine.pump()
    assert chat.session.model.loaded == (other, chat.session.model.loaded[1]) and chat.session.model_path == other


def test_there_is_nothing_to_cancel_when_nothing_loads(chat):
    chat.started()
    assert not chat.session.cancel_load() and chat.engine.load_cancels == 0


def test_an_engine_that_cannot_cancel_a_load_says_so(chat):
    chat.engine.hold_loads = True
    chat.session.start()
    chat.engine.cancel_load = None  # a remote server's engine: its loads are quick and cannot be stopped
    assert not chat.session.cancel_load()
    assert chat.heard.last("notice") == ("This engine cannot cancel a load.",)
    assert chat.session.model.loading is not None


def test_a_cancel_to_a_gone_engine_reports_it_dead(chat):
    chat.engine.hold_loads = True
    chat.session.start()
    chat.engine.running = False
    assert not chat.session.cancel_load()
    assert chat.session.model.dead and chat.heard.last("model_changed") == ("Engine stopped",)


"""The Qt side of the chat: one signal per listener call, and engine events from another thread
handled on the GUI thread, in order."""

from __future__ import annotations

import inspect
import threading
from typing import get_type_hints

from PySide6.QtCore import QThread

from app.chat.listener import SessionListener
from app.gui.chat_controller import EVENTS, ChatController, SignalRelay
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.protocol import Token
from engine.starter import starter_model_path
from models.hardware.profile import profile_for
from tests.fixtures.fake_engine import FakeEngine

WAIT_MS = 10_000


SAMPLES = {bool: True, int: 7, float: 0.5, str: "text"}


def test_every_listener_call_is_a_signal_of_the_same_name_that_carries_its_arguments(qtbot, tmp_path):
    """The events are declared once (SessionListener); each call on the session's listener arrives at
    the signal of that name with the same arguments, objects as themselves."""
    store = ChatStore(tmp_path / "chats.sqlite3")
    controller = ChatController(store, "model.gguf", LoadPlanner(profile_for(ram_gib=16)), lambda _d: FakeEngine())
    relay = SignalRelay(controller)
    names = [name for name in vars(SessionListener) if not name.startswith("_")]
    assert len(names) == 28 and set(EVENTS) == set(names)
    for name in names:
        method = getattr(SessionListener, name)
        hints = get_type_hints(method)
        arguments = [SAMPLES.get(hints[a], object()) for a in list(inspect.signature(method).parameters)[1:]]
        received = []
        getattr(controller, name).connect(lambda *args, into=received: into.append(args))
        getattr(relay, name)(*arguments)
        assert len(received) == 1, name
        assert all(got is sent or got == sent for got, sent in zip(received[0], arguments, strict=True)), name
    store.close()


def test_tokens_from_the_engine_thread_reach_the_view_on_the_gui_thread_in_order(qtbot, tmp_path):
    engine = FakeEngine()
    store = ChatStore(tmp_path / "chats.sqlite3")

    def make_engine(deliver):
        engine.handle = deliver  # what the engine's reader thread calls
        return engine

    controller = ChatController(store, str(starter_model_path()), LoadPlanner(profile_for(ram_gib=16)), make_engine)
    session = controller.session
    session.open_conversation(store.create_conversation("Chat", ChatSettings(load=LoadSettings(n_ctx=2048))).id)
    with qtbot.waitSignal(controller.loaded, timeout=WAIT_MS):
        session.start()
        engine.pump()
    with qtbot.waitSignal(controller.stream_started, timeout=WAIT_MS):
        assert session.send("Count.")
    shown, threads = [], set()
    controller.stream_text.connect(lambda text: (shown.append(text), threads.add(QThread.currentThread())))
    request_id = engine.last_request
    pieces = [f" {i}" for i in range(200)]
    reader = threading.Thread(target=lambda: [engine.handle(Token(request_id, p)) for p in pieces])
    reader.start()
    reader.join()
    qtbot.waitUntil(lambda: len(shown) == len(pieces), timeout=WAIT_MS)
    assert shown == pieces and threads == {controller.thread()}
    session.shutdown()
    store.close()

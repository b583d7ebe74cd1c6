"""A ChatSession over a real SQLite file and the real load planner, driven by a scripted engine."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.chat.session import ChatSession
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.starter import starter_model_path
from models.hardware.profile import profile_for
from tests.fixtures.fake_engine import FakeEngine, HandTimer, Recorder

FIXED = ChatSettings(load=LoadSettings(n_ctx=2048))  # a fixed context: what a load asks for is known in advance


@dataclass
class Chat:
    session: ChatSession
    engine: FakeEngine
    heard: Recorder
    timers: list[HandTimer]
    store: ChatStore
    db: Path

    def on_disk(self, message_id: int) -> str:
        """The message's content as the file has it (read through a connection of its own)."""
        with sqlite3.connect(self.db) as reader:
            return reader.execute("SELECT content FROM messages WHERE id = ?", (message_id,)).fetchone()[0]

    def started(self) -> None:
        """The engine started and the open chat's model loaded."""
        self.session.start()
        self.engine.pump()

    def reply(self, text: str, *pieces: str) -> int:
        """Send `text`, stream `pieces` and finish: the request id."""
        assert self.session.send(text)
        self.engine.pump()
        request_id = self.engine.last_request
        self.engine.stream(request_id, *pieces)
        self.engine.finish(request_id, "".join(pieces))
        self.engine.pump()
        return request_id


@pytest.fixture
def chat(tmp_path: Path) -> Chat:
    db = tmp_path / "chats.sqlite3"
    store = ChatStore(db)
    engine, heard, timers = FakeEngine(), Recorder(), []

    def make_timer(callback):
        timers.append(HandTimer(callback))
        return timers[-1]

    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)
    session = ChatSession(store, engine, planner, str(starter_model_path()), heard, make_timer)
    engine.handle = session.handle
    conversation = store.create_conversation("New chat", FIXED)
    session.open_conversation(conversation.id)
    yield Chat(session, engine, heard, timers, store, db)
    store.close()

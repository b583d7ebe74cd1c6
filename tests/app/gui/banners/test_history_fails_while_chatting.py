"""The chat history refuses writes while the window runs (the disk filled up, the file became read-only):
the reply goes on in the window, the banner says why, sending turns off, the typed text stays, no crash.

The refusal is SQLite's own: the store's connection is switched to `query_only`, so every write fails
with "attempt to write a readonly database", as it does when the file's permissions change under it.
"""

from __future__ import annotations

from app.services.history.store import ChatStore
from tests.app.conftest import LONG, LONG_PROMPT

TIMEOUT_MS = 120_000


def refuse_writes(store: ChatStore, refuse: bool = True) -> None:
    store._db.execute(f"PRAGMA query_only = {'ON' if refuse else 'OFF'}")


def test_a_reply_that_can_no_longer_be_saved_still_streams_to_its_end(qtbot, make_window):
    window = make_window(settings=LONG)
    c, s = window.controller, window.session
    window.submit(LONG_PROMPT)
    # Once the streaming reply has been saved at least once, the history stops taking writes.
    qtbot.waitUntil(lambda: s.store.list_messages(s.current.id)[-1].content != "", timeout=TIMEOUT_MS)
    finished = []
    c.stream_finished.connect(finished.append)
    refuse_writes(s.store)
    with qtbot.waitSignals([c.history_failed, c.stream_finished], timeout=TIMEOUT_MS):
        pass
    (final,) = finished
    qtbot.waitUntil(lambda: not s.busy, timeout=TIMEOUT_MS)
    assert window.history_banner.isVisible() and "read-only" in window.history_banner.text().lower()
    assert not window.composer.isEnabled() and not window.send_stop.send_button.isEnabled()
    refuse_writes(s.store, False)
    saved = s.store.list_messages(s.current.id)[-1]
    # The file keeps what was saved before the refusal; the window shows the whole reply, finished.
    assert saved.role == "assistant" and saved.content and final.content.startswith(saved.content)
    assert len(final.content) > len(saved.content) and final.state == "complete"
    last_words = " ".join(final.content.split()[-3:])
    assert last_words in " ".join(window.chat.plain_text().split())

def test_a_message_the_history_cannot_take_stays_in_the_composer(qtbot, make_window):
    window = make_window()
    c, s = window.controller, window.session
    before = s.store.list_messages(s.current.id)
    refuse_writes(s.store)
    with qtbot.waitSignal(c.history_failed, timeout=10_000):
        window.composer.setPlainText("Please keep this text.")
        window.submit(window.composer.toPlainText())
    assert window.composer.toPlainText() == "Please keep this text."
    assert window.history_banner.isVisible() and not s.busy
    refuse_writes(s.store, False)
    assert s.store.list_messages(s.current.id) == before

"""From Enter to the first token painted in the window, against the engine's own time to first token.

The real window (offscreen) with the built-in model in the real engine process. Each round opens a new chat,
types a short question and presses Enter; a filter on the transcript's viewport notes the first paint after
the reply's first text was rendered. The engine's TTFT (from its reply's stats: the request taken to the first
token) is what the model needs; the rest is what Tailor adds: the window's send (settings saved, the message
stored), the trip to the engine process and back, and the render. Then the same for a next turn in each chat.
Medians of ROUNDS rounds (TAILOR_BENCH_ROUNDS, 5 by default).

    python -m tests.bench.window_first_token
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QObject, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QKeyEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

ROUNDS = int(os.environ.get("TAILOR_BENCH_ROUNDS", "5"))
QUESTIONS = ["What is the capital of France?", "Name three colours of the rainbow.", "What do bees make?",
             "How many legs does a spider have?", "What is the opposite of cold?", "Which planet is red?",
             "What do cows drink?", "Name a fruit that is yellow."]
TARGET_MS = 50.0
# Between turns: past the engine's 1 s grace before it prefills the next turn ahead (engine/next_turn.py) and
# that work itself, as a person takes to read a reply and type the next question.
SETTLE_S = float(os.environ.get("TAILOR_BENCH_SETTLE_S", "3"))  # what the window and the trip to the engine may add to the engine's own TTFT


class FirstPaint(QObject):
    """Notes the first paint of the transcript that shows text under the streaming reply's header (the header
    is inserted when the reply starts, its text when the first tokens are rendered)."""

    def __init__(self, view):
        super().__init__()
        self.view, self.at = view, None

    def arm(self) -> None:
        self.at = None

    def eventFilter(self, _watched, event) -> bool:  # noqa: N802 (Qt override)
        if (event.type() == QEvent.Type.Paint and self.at is None and self.view.streaming
                and self.view.document().toPlainText().rsplit("Assistant", 1)[-1].strip()):
            self.at = time.perf_counter()
        return False


def wait_until(app: QApplication, done, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the window did not get there in time")
        app.processEvents()
        time.sleep(0.0005)


def main() -> None:
    from app.gui.main import build_window
    from engine.starter import starter_model_path

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        window = build_window(Path(tmp) / "chats.sqlite3", str(starter_model_path()), Path(tmp) / "engine.log")
        window.resize(1200, 800)
        window.show()
        loaded = []
        window.controller.loaded.connect(lambda *_a: loaded.append(True))
        window.session.start()
        wait_until(app, lambda: bool(loaded))
        painter = FirstPaint(window.chat)
        window.chat.viewport().installEventFilter(painter)
        finished: list = []
        window.controller.stream_finished.connect(finished.append)
        marks: dict[str, float] = {}  # when each step of the way was first reached, this turn
        for name in ("message_added", "stream_started", "stream_text"):
            getattr(window.controller, name).connect(
                lambda *_a, n=name: marks.setdefault(n, time.perf_counter()))
        stages: dict[str, list[float]] = {"message_added": [], "stream_started": [], "stream_text": []}
        first, first_engine, nxt, nxt_engine = [], [], [], []
        for r in range(ROUNDS):
            window.new_conversation()
            for question, paints, engine in ((QUESTIONS[r % len(QUESTIONS)], first, first_engine),
                                             ("And why?", nxt, nxt_engine)):
                time.sleep(SETTLE_S)  # the engine's after-reply work is over: each turn starts from an idle engine
                app.processEvents()
                window.composer.setPlainText(question)
                window.composer.setFocus()
                finished.clear()
                marks.clear()
                painter.arm()
                pressed = time.perf_counter()
                QApplication.sendEvent(window.composer, QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Return,
                                                                  Qt.KeyboardModifier.NoModifier, "\r"))
                wait_until(app, lambda: bool(finished))
                wait_until(app, lambda: painter.at is not None, 5.0)
                paints.append(painter.at - pressed)
                engine.append(finished[0].stats["ttft_s"])
                for name, times in stages.items():
                    times.append(marks[name] - pressed)
        window.close()
        QTimer.singleShot(0, app.quit)
    for name, paints, engine in (("first message of a chat", first, first_engine),
                                 ("its next turn", nxt, nxt_engine)):
        painted, own = statistics.median(paints) * 1000, statistics.median(engine) * 1000
        print(f"window {name}: Enter to first painted token {painted:.0f} ms, the engine's TTFT {own:.0f} ms: "
              f"Tailor adds {painted - own:.0f} ms (target <= {TARGET_MS:.0f})")
    print("  on the way, all turns (median ms after Enter): " + ", ".join(
        f"{name} {statistics.median(times) * 1000:.0f}" for name, times in stages.items()))


if __name__ == "__main__":
    main()

"""How long does the window's event loop stall while Chat → Import… reads a 200 MB ChatGPT export?

The real window (offscreen) over a fresh history; the same ChatGPT-shaped conversations.json as the
import_memory bench (tests/fixtures/chatgpt/generate.py: 5,000 conversations, about 200 MB, one long
chat). Import… runs as a user starts it (the file dialog answered by the bench), on the window's
background thread with its progress bar; a 1 ms timer records the gaps between its ticks until the list
shows the imported chats. Reported apart: the longest gap while the file is read, and the one pass at
the end that fills the chat list with 5,000 chats. Target for both: the UI-stall bench's 50 ms.

    python -m tests.bench.bench_import_stall     # TAILOR_BENCH_IMPORT_MB (default 200), _CHATS (5000)
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.gui import chat_transfer  # noqa: E402
from app.gui.chat_controller import ChatController  # noqa: E402
from app.gui.main_window import MainWindow  # noqa: E402
from app.services.history.store import ChatStore  # noqa: E402
from app.services.planning.load_planner import LoadPlanner  # noqa: E402
from tests.bench.bench_ui_stall import TARGET_MS, ScriptedClient  # noqa: E402
from tests.fixtures.chatgpt.generate import write_export  # noqa: E402

MB = 1_000_000
TOTAL_MB = int(os.environ.get("TAILOR_BENCH_IMPORT_MB", "200"))
CHATS = int(os.environ.get("TAILOR_BENCH_IMPORT_CHATS", "5000"))


def measure() -> dict[str, float]:
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        export = folder / "conversations.json"
        write_export(export, CHATS, TOTAL_MB * MB, big_chat_bytes=8 * MB)
        store = ChatStore(folder / "chats.sqlite3")
        client = ScriptedClient([], 100.0)

        def make_engine(deliver):
            client.deliver = deliver
            return client

        controller = ChatController(store, "scripted.gguf", LoadPlanner(status_dir=folder), make_engine)
        window = MainWindow(controller)
        window.show()
        app.processEvents()
        transfer = window.chat_transfer
        chat_transfer.import_file_path = lambda _parent: str(export)  # the file dialog, answered

        ticks: list[float] = []
        meter = QTimer(timerType=Qt.TimerType.PreciseTimer, interval=1)
        meter.timeout.connect(lambda: ticks.append(time.perf_counter()))
        loop = QEventLoop()
        done_at: list[float] = []

        def check() -> None:  # the import is over once the list holds its chats
            if not transfer.importing and len(window.conversations.chat_items()) >= CHATS // 2:
                done_at.append(time.perf_counter())
                loop.quit()

        poll = QTimer(interval=50)
        poll.timeout.connect(check)
        meter.start()
        poll.start()
        started = time.perf_counter()
        transfer.import_()
        QTimer.singleShot(600_000, loop.quit)  # never hang
        loop.exec()
        meter.stop()
        poll.stop()
        gaps = [(b - a, b) for a, b in zip(ticks, ticks[1:], strict=False)]
        refill = max(gaps, default=(0.0, 0.0))
        reading = [g for g, _ in gaps if g != refill[0]]
        figures = {
            "import_s": (done_at[0] if done_at else time.perf_counter()) - started,
            "chats_listed": float(len(window.conversations.chat_items())),
            "longest_stall_ms": refill[0] * 1000,
            "second_longest_stall_ms": max(reading, default=0.0) * 1000,
        }
        window.close()
        store.close()
        window.deleteLater()
    return figures


def main() -> None:
    f = measure()
    print(f"import of {TOTAL_MB} MB, {CHATS} chats through Chat → Import…: {f['import_s']:.1f} s, "
          f"{f['chats_listed']:.0f} chats listed")
    print(f"import_longest_stall_ms={f['longest_stall_ms']:.1f}, next longest {f['second_longest_stall_ms']:.1f} "
          f"(target <= {TARGET_MS:.0f})")


if __name__ == "__main__":
    main()

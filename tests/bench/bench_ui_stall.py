"""How long can the window's event loop stall while a reply streams?

Streams 2,000 tokens of Markdown (paragraphs, lists and code blocks) into the real window
at ~200 tokens/s. The events come from a scripted client on its own thread, through the
same path as the engine's reader thread (ChatController's handler), so the figure measures the GUI side
only. A 1 ms timer records the gaps between its ticks; the longest gap is the stall.
The stream starts once the Markdown warm-up (lexer compilation) is done, as it is in the
app by the time the model has loaded.

Run: `python -m tests.bench.bench_ui_stall [--tokens N] [--rate TOKENS_PER_S]`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.gui.chat_controller import ChatController  # noqa: E402
from app.gui.main_window import MainWindow  # noqa: E402
from app.services.history.store import ChatStore  # noqa: E402
from app.services.markdown_render import wait_for_warm_up  # noqa: E402
from app.services.planning.load_planner import LoadPlanner  # noqa: E402
from engine.protocol import Done, Event, GenerationStats, Loaded, ModelInfo, Token  # noqa: E402

TARGET_MS = 50.0


def markdown_tokens(count: int) -> list[str]:
    """`count` token-sized pieces of a Markdown reply with code blocks, lists and emphasis."""
    para = "Here is how the **approach** works, with `inline code`, a [link](https://example.com) and more words. "
    code = (
        "```python\ndef step(state, x):\n    total = sum(v * 2 for v in state)\n    return total + x\n```\n\n"
    )
    listing = "- first point with *emphasis*\n- second point\n- third point\n\n"
    text = ""
    section = 0
    while len(text) < count * 4 + 8:
        text += f"### Part {section}\n\n" + para * 3 + "\n\n" + (code if section % 2 else listing)
        section += 1
    return [text[i : i + 4] for i in range(0, count * 4, 4)]


class ScriptedClient:
    """Stands in for EngineClient: replies with a fixed token stream from a thread."""

    def __init__(self, tokens: list[str], rate: float):
        self.tokens, self.rate = tokens, rate
        self.deliver = None  # set to the controller's `deliver`
        self.running = False
        self.pid = None
        self._cancel = threading.Event()

    def start(self) -> None:
        self.running = True

    restart = start

    def shutdown(self) -> None:
        self._cancel.set()
        self.running = False

    def load(self, request) -> None:  # noqa: ANN001
        info = ModelInfo(
            request.path, "scripted", "llama", request.n_ctx, 8192, 135_000_000, 98_000_000, True
        )
        self.deliver(Loaded(info, 0.0))

    def generate(self, messages, sampling, *, shape=None) -> int:  # noqa: ANN001
        threading.Thread(target=self._stream, args=(1,), daemon=True).start()
        return 1

    def cancel(self, request_id: int) -> None:
        self._cancel.set()

    def _stream(self, request_id: int) -> None:
        interval = 1.0 / self.rate
        start = time.perf_counter()
        for i, piece in enumerate(self.tokens):
            if self._cancel.is_set():
                break
            self._send(Token(request_id, piece))
            delay = start + (i + 1) * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        elapsed = time.perf_counter() - start
        stats = GenerationStats(0.05, 20, 0, len(self.tokens), 400.0, len(self.tokens) / elapsed)
        self._send(Done(request_id, "".join(self.tokens), "stop", stats))

    def _send(self, event: Event) -> None:
        self.deliver(event)


def measure(tokens: int = 2000, rate: float = 200.0) -> dict[str, float]:
    """Stream `tokens` tokens at `rate` per second into a window; the figures measured."""
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        client = ScriptedClient(markdown_tokens(tokens), rate)
        def make_engine(deliver):
            client.deliver = deliver
            return client

        store = ChatStore(Path(tmp) / "chats.sqlite3")
        controller = ChatController(store, "scripted.gguf", LoadPlanner(status_dir=Path(tmp)), make_engine)
        session = controller.session
        window = MainWindow(controller)
        window.show()
        session.start()
        app.processEvents()
        # In the app the model takes longer to load than the lexers to compile; do not
        # measure a first code block racing the warm-up thread.
        wait_for_warm_up(10.0)

        gaps: list[float] = []
        last = [0.0]

        def tick() -> None:
            now = time.perf_counter()
            if last[0]:
                gaps.append(now - last[0])
            last[0] = now

        meter = QTimer(timerType=Qt.TimerType.PreciseTimer, interval=1)
        meter.timeout.connect(tick)
        loop = QEventLoop()
        controller.stream_finished.connect(loop.quit)
        started = time.perf_counter()
        meter.start()
        session.send("Explain the approach, with code.")
        QTimer.singleShot(int(tokens / rate * 1000) + 60_000, loop.quit)  # never hang
        loop.exec()
        meter.stop()
        wall = time.perf_counter() - started
        figures = {
            "ui_longest_stall_ms": max(gaps) * 1000 if gaps else 0.0,
            "ui_renders": float(window.chat.renders),
            "ui_last_render_ms": window.chat.last_render_ms,
            "stream_s": wall,
            "reply_chars": float(len(store.list_messages(session.current.id)[-1].content)),
        }
        window.close()
        store.close()
        window.deleteLater()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0, help="tokens per second")
    args, _ = parser.parse_known_args()
    figures = measure(args.tokens, args.rate)
    print(f"ui_longest_stall_ms={figures['ui_longest_stall_ms']:.1f} (target <= {TARGET_MS:.0f})")
    print(
        f"ui_renders={figures['ui_renders']:.0f} for {args.tokens} tokens in {figures['stream_s']:.1f} s "
        f"(last render {figures['ui_last_render_ms']:.1f} ms, reply {figures['reply_chars']:.0f} chars)"
    )


if __name__ == "__main__":
    main()

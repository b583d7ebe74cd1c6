"""A MainWindow over a scripted engine, filled as a user's would be, for layout checks and screenshots.

No pytest and no qtbot here: the Xvfb check runs this in a process of its own (tests/app/gui/xvfb_layout.py),
the offscreen tests (tests/app/gui/test_window_layout.py) call it in theirs. Events from the FakeEngine
reach the window from a thread of their own, as the engine client's reader thread delivers them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QEventLoop
from PySide6.QtWidgets import QApplication

from app.gui.chat_controller import ChatController
from app.gui.main_window import MainWindow
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.protocol import DeviceMemory, GenerationStats, Loaded, LoadRequest, MemoryReport
from engine.starter import starter_model_path
from models.hardware.profile import HardwareProfile, profile_for
from tests.fixtures.fake_engine import FakeEngine

WAIT_S = 10.0
GB = 10**9
# This machine as a user without an NVIDIA driver sees it (the panel line the issue saw cut off).
NO_DRIVER = HardwareProfile(
    gpus=(), ram_total_bytes=16 * 1024**3, ram_available_bytes=11 * GB, cpu_physical_cores=8, cpu_logical_cores=16,
    cpu_name="AMD Ryzen 7 5800X 8-Core Processor",
    source="none: no NVIDIA driver is installed: the NVML library libnvidia-ml was not found",
)
TITLES = (
    "Planning a week of vegetarian dinners for a family of four with a small budget",
    "Why does my Rust borrow checker complain about this closure",
    "Trip to Lisbon",
)
QUESTION = "How do I read a file line by line in Python, and why is that better than read()?"
ANSWER = (
    "Iterate over the file object: it reads one line at a time, so memory stays flat however large "
    "the file is, where `read()` loads all of it at once.\n\n"
    "```python\nwith open(\"notes.txt\", encoding=\"utf-8\") as f:\n    for line in f:\n"
    "        print(line.rstrip())\n```\n\n"
    "The `with` block closes the file even if the loop raises."
)
STATS = GenerationStats(ttft_s=0.21, prompt_tokens=41, cached_tokens=21, gen_tokens=96, prefill_tok_s=412.0,
                        decode_tok_s=38.6)


def wait_until(condition: Callable[[], bool], timeout_s: float = WAIT_S, what: str = "") -> None:
    """Run the event loop until `condition()` holds; TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"still not true after {timeout_s} s: {what or condition}")
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)


class StarterEngine(FakeEngine):
    """A FakeEngine whose loaded model calls itself what the built-in model does (the screenshots show it)."""

    def load(self, request: LoadRequest) -> None:
        super().load(request)
        if self.outbox and isinstance(self.outbox[-1], Loaded):
            loaded = self.outbox.pop()
            info = replace(loaded.info, name="SmolLM2 135M Instruct", n_params=134_515_008, size_bytes=270_000_000)
            self.outbox.append(replace(loaded, info=info))


def memory_report() -> MemoryReport:
    """The host's memory as the engine reports it with the starter model loaded and one reply written."""
    ram = DeviceMemory("cpu", weights_bytes=270_000_000, kv_allocated_bytes=100_663_296, kv_used_bytes=1_204_224,
                       compute_bytes=84_000_000, other_bytes=310_000_000, free_bytes=11 * GB,
                       total_bytes=16 * 1024**3, kv_used_tokens=49, kv_total_tokens=4096,
                       prefix_cache_bytes=18_000_000, name="RAM")
    return MemoryReport(devices=(ram,), kv_tokens_used=49, kv_tokens_total=4096, prefix_cache_disk_bytes=52_000_000)


class ScriptedWindow:
    """The window, its FakeEngine and its store in `folder`; `fill()` gives it chats, a reply and figures."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.engine = StarterEngine()
        self.store = ChatStore(folder / "chats.sqlite3")
        planner = LoadPlanner(profile_for(ram_gib=16), status_dir=folder / "engines")

        def make_engine(deliver):
            self.engine.handle = deliver
            return self.engine

        self.controller = ChatController(self.store, str(starter_model_path()), planner, make_engine)
        self.window = MainWindow(self.controller)
        self.controller.setParent(self.window)
        self.window.memory_page.hardware.detect = lambda: NO_DRIVER
        self._loaded = False
        self.controller.loaded.connect(lambda _event: setattr(self, "_loaded", True))

    def pump(self) -> None:
        thread = threading.Thread(target=self.engine.pump)
        thread.start()
        thread.join()

    def start(self) -> None:
        settings = ChatSettings(load=LoadSettings(n_ctx=4096), temperature=0.7)
        self.window.session.update_settings(settings)
        self.window.settings_panel.set_settings(settings)
        self.window.session.start()
        self.pump()
        wait_until(lambda: self._loaded, what="the scripted model loaded")

    def fill(self) -> None:
        """Chats with long titles, one question answered (with its stats), and a memory report."""
        for title in TITLES:
            self.store.create_conversation(title)
        self.window.refresh_list()
        self.window.submit(QUESTION)
        request = self.engine.last_request
        self.engine.stream(request, *ANSWER.split(" "))
        self.engine.finish(request, ANSWER, stats=STATS)
        self.engine.say(memory_report())
        self.pump()
        wait_until(lambda: not self.window.session.busy, what="the reply finished")
        panel = self.window.memory_page.memory
        wait_until(lambda: panel.report is not None and panel.last_label.text() != "", what="the memory figures")

    def close(self) -> None:
        self.window.close()
        self.engine.shutdown()

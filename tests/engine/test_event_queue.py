"""The event queue's waits stay interruptible: Ctrl+C reaches a main thread that waits for an event."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from engine.event_queue import EventQueue
from engine.protocol import Done, GenerationStats, Token

# Far above the queue's 0.1 s wake-up, far below the 30 s the wait would otherwise take.
WOKEN_WITHIN_S = 10.0


def test_a_sigint_delivered_to_another_thread_still_interrupts_the_main_threads_wait():
    """The kernel may hand a process's SIGINT to any thread; Python runs the handler on the main one."""
    queue = EventQueue()

    def ctrl_c_lands_here() -> None:
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    # Python's own handler, whatever this process inherited (a background job starts with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=ctrl_c_lands_here, daemon=True).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            queue.next_event(timeout=30)
        assert time.monotonic() - t0 < WOKEN_WITHIN_S
    finally:
        signal.signal(signal.SIGINT, previous)


def test_waits_return_events_and_time_out():
    queue = EventQueue()
    assert queue.next_event(timeout=0.05) is None
    stats = GenerationStats(0.1, 1, 0, 1, 1.0, 1.0)
    for event in (Token(2, "other reply"), Token(1, "a"), Done(1, "a", "stop", stats)):
        queue.put(event)
    assert [type(e).__name__ for e in queue.stream(1)] == ["Token", "Done"]

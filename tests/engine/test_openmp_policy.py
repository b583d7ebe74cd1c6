"""The engine's OpenMP wait policy: spin on idle cores, sleep on busy ones, the user's setting kept."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from engine.openmp_policy import ThreadGovernor, choose_openmp_wait_policy, choose_policy, threads_for


def test_idle_cores_spin() -> None:
    assert choose_policy(logical_cpus=2, busy_share=0.0, threads=2) == "default"
    assert choose_policy(logical_cpus=2, busy_share=0.2, threads=2) == "default"  # a terminal, a shell


def test_a_core_in_use_elsewhere_makes_the_threads_sleep() -> None:
    assert choose_policy(logical_cpus=2, busy_share=0.5, threads=2) == "passive"  # a build on one of two cores
    assert choose_policy(logical_cpus=2, busy_share=1.0, threads=2) == "passive"


def test_spare_cores_beyond_the_threads_absorb_a_load() -> None:
    # 16 logical CPUs, torch on 8 threads: a build on 4 cores leaves 12 idle.
    assert choose_policy(logical_cpus=16, busy_share=0.25, threads=8) == "default"
    assert choose_policy(logical_cpus=16, busy_share=0.75, threads=8) == "passive"


def test_the_users_policy_is_kept() -> None:
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert "ACTIVE" in choose_openmp_wait_policy(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_choice_is_set_only_when_it_is_passive() -> None:
    """In a fresh process (torch not loaded): the environment says PASSIVE exactly when that was chosen."""
    code = (
        "import os; from engine.openmp_policy import choose_openmp_wait_policy as c; env = {}; p = c(env); "
        "assert (env.get('OMP_WAIT_POLICY') == 'PASSIVE') == (p == 'passive'), (p, env); "
        "assert p in ('default', 'passive'), p; print(p)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_once_torch_is_loaded_nothing_changes() -> None:
    import torch  # noqa: F401 - loaded, as in the engine after its first model

    env: dict[str, str] = {}
    assert "torch is loaded" in choose_openmp_wait_policy(env)
    assert env == {}


def test_threads_keep_a_core_each() -> None:
    assert threads_for(logical_cpus=2, others_cores=0.0, full=2) == 2
    assert threads_for(logical_cpus=2, others_cores=0.3, full=2) == 2
    assert threads_for(logical_cpus=2, others_cores=1.0, full=2) == 1
    assert threads_for(logical_cpus=2, others_cores=5.0, full=2) == 1  # never none
    assert threads_for(logical_cpus=16, others_cores=4.0, full=8) == 8


def test_a_busy_program_takes_threads_from_the_decode() -> None:
    """A real program spinning on all cores but one: the next look runs torch on fewer threads."""
    logical = psutil.cpu_count() or 1
    if logical < 2:
        pytest.skip("one CPU: there are no threads to take")
    set_to: list[int] = []
    governor = ThreadGovernor(logical, set_to.append, time.monotonic())
    code = "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(max(1, logical - 1))]
    try:
        # The hogs' CPU time accrues (the governor reads counters), for a decode's look (not an idle gap's).
        time.sleep((ThreadGovernor.LOOK_S + ThreadGovernor.STALE_S) / 2)
        threads = governor.look(time.monotonic())
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert threads < logical and set_to == [threads]


def test_no_look_before_its_time_and_one_thread_is_left_alone() -> None:
    set_to: list[int] = []
    start = time.monotonic()
    assert ThreadGovernor(4, set_to.append, start).look(start + ThreadGovernor.LOOK_S / 2) == 4
    assert ThreadGovernor(1, set_to.append, start).look(start + 10) == 1
    assert set_to == []


class FakeCpu:
    """The machine's busy CPU seconds and this process's, as the test moves them."""

    def __init__(self):
        self.busy, self.own, self.running = 0.0, 0.0, 0

    def times(self) -> tuple[float, float]:
        return self.busy, self.own


def test_after_an_idle_gap_what_runs_now_decides_not_the_gaps_average() -> None:
    cpu, set_to = FakeCpu(), []
    governor = ThreadGovernor(2, set_to.append, 0.0, times=cpu.times, running_now=lambda: cpu.running)
    cpu.busy += 0.6  # another program took 1.2 cores while this one decoded
    assert governor.look(0.5) == 1
    # Then this engine waits 5 s while another server answers its own requests on both cores...
    cpu.busy += 10.0
    # ... and is done when the next request comes: nothing else runs now, every thread goes to the prefill.
    assert governor.look(5.5) == 2 and set_to == [1, 2]
    cpu.busy += 0.1  # ... and the look after such a start comes soon: a program that goes on is met there
    assert governor.look(5.5 + ThreadGovernor.QUICK_LOOK_S * 1.01) == 1 and set_to == [1, 2, 1]
    cpu.busy += 10.0
    cpu.running = 2  # other programs' threads fill both cores now: the gap's average stands
    assert governor.look(10.5) == 1 and set_to == [1, 2, 1]
    cpu.running = 0
    cpu.busy += 0.6  # a decode's look (0.5 s apart) goes by the average, whatever runs at that instant
    assert governor.look(10.5 + ThreadGovernor.QUICK_LOOK_S) == 1  # not yet: the next look is 0.5 s on
    assert governor.look(11.0) == 1 and set_to == [1, 2, 1]
    cpu.busy += 10.0
    cpu.running = 1  # one thread of another program at that instant, on two cores: most often a passing one
    assert governor.look(20.0) == 2 and set_to == [1, 2, 1, 2]


def test_a_program_running_now_is_seen_where_the_kernel_says() -> None:
    from engine.openmp_policy import others_running_now

    if others_running_now() is None:
        pytest.skip("this system does not say what runs now (no /proc/loadavg)")
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        end = time.monotonic() + 5
        seen = 0
        while time.monotonic() < end and not seen:  # the count is a moment's: the hog is on a CPU most of them
            seen = others_running_now()
            time.sleep(0.01)
    finally:
        hog.kill()
        hog.wait()
    assert seen >= 1


def test_this_process_s_threads_and_its_parent_s_are_not_other_programs(tmp_path: Path) -> None:
    """A thread of the engine itself that runs as it looks (the one that handed it the request, a spinning
    OpenMP thread), or of the window or server that started it (which just sent the request), is no other
    program: the count leaves them out."""
    from engine.openmp_policy import others_running_now

    (tmp_path / "loadavg").write_text("0.52 0.58 0.59 6/467 12345\n")
    threads = {"self": (("100", "R"), ("101", "S"), ("102", "R")), str(os.getppid()): (("7", "R"), ("8", "S"))}
    for pid, tasks in threads.items():
        for tid, state in tasks:
            (tmp_path / pid / "task" / tid).mkdir(parents=True)
            name = "(python3 worker)" if tid == "101" else "(python3)"  # a name with a space, as threads may have
            (tmp_path / pid / "task" / tid / "stat").write_text(f"{tid} {name} {state} 1 {tid} 0 0 -1\n")
    assert others_running_now(tmp_path) == 3  # 6 runnable, 2 of them this process's and 1 its parent's
    (tmp_path / "loadavg").write_text("0.52 0.58 0.59 3/467 12345\n")
    assert others_running_now(tmp_path) == 0
    assert others_running_now(tmp_path / "nowhere") is None


def test_own_threads_on_a_cpu_are_counted_where_the_kernel_says() -> None:
    from engine.openmp_policy import runnable_threads

    if not Path("/proc/self/task").is_dir():
        pytest.skip("this system has no /proc/self/task")
    stop, block = threading.Event(), b"x" * 4_000_000

    def spin() -> None:  # hashing a large block runs without the GIL: each spinner keeps a CPU busy
        while not stop.is_set():
            hashlib.sha256(block).digest()

    spinners = [threading.Thread(target=spin) for _ in range(2)]
    for spinner in spinners:
        spinner.start()
    try:
        end, seen = time.monotonic() + 10, 0
        while time.monotonic() < end and seen < 2:  # a moment's count: the spinners are runnable most moments
            seen = max(seen, runnable_threads())
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()
    assert seen >= 2

"""How the PyTorch engine's OpenMP threads wait between two parallel ops, chosen by load before torch loads.

A CPU decode step is hundreds of small parallel ops. Between two of them OpenMP's threads either spin
for a while (libgomp's default) or go to sleep at once (OMP_WAIT_POLICY=PASSIVE). On idle cores
spinning wins: waking a sleeping thread costs tens of microseconds per op, which made the engine's
decode 0.65x transformers' (which runs on the default). On a busy machine spinning loses badly: every
op waits for a spinner the OS has descheduled for another program (20x slower measured). OpenMP reads
the policy once, when torch loads it, so the choice is made then, from how busy the cores are now;
a load that comes later is met by ThreadGovernor, which gives the cores other programs take back to them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Literal

import psutil

log = logging.getLogger(__name__)

# How long the cores are watched before the choice: long enough to see a steady load, short beside a load.
SAMPLE_S = 0.25
# Spinning needs a core for every thread: other programs may use at most this much of the cores the
# threads will run on (a shell, a terminal redrawing; not a build or another model).
SPARE_CORES = 0.5

Policy = Literal["default", "passive"]


def choose_policy(logical_cpus: int, busy_share: float, threads: int) -> Policy:
    """"default" (spin, then sleep) when the cores other programs leave idle hold `threads` spinning
    threads, give or take SPARE_CORES; else "passive". `busy_share`: 0..1 of all logical CPUs in use."""
    idle_cores = logical_cpus * (1.0 - busy_share)
    return "default" if idle_cores >= threads - SPARE_CORES else "passive"


def choose_openmp_wait_policy(environ: MutableMapping[str, str] | None = None, threads: int | None = None) -> str:
    """Set OMP_WAIT_POLICY in `environ` (os.environ) for the torch about to load; returns what was chosen.

    A policy already in the environment is the user's and is kept. `threads`: the OpenMP threads torch
    will run (default: one per physical core, torch's own default).
    """
    env = os.environ if environ is None else environ
    if env.get("OMP_WAIT_POLICY"):
        return f"{env['OMP_WAIT_POLICY']} (set in the environment)"
    if "torch" in sys.modules:  # OpenMP has read its settings already
        return "unchanged (torch is loaded)"
    logical = psutil.cpu_count() or 1
    threads = threads or psutil.cpu_count(logical=False) or logical
    busy = psutil.cpu_percent(interval=SAMPLE_S) / 100.0
    policy = choose_policy(logical, busy, threads)
    if policy == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    log.info("OpenMP wait policy %s: %.0f%% of %d CPUs busy, %d threads", policy, 100 * busy, logical, threads)
    return policy


def threads_for(logical_cpus: int, others_cores: float, full: int) -> int:
    """Threads that keep a core each while other programs use `others_cores` of the cores (1..full)."""
    return max(1, min(full, round(logical_cpus - others_cores)))


class ThreadGovernor:
    """While a reply decodes, every LOOK_S this looks at what other programs use of the cores (the whole
    machine's CPU time less this process's, since the last look) and runs torch on only as many threads
    as there are cores left, back to all of them when the others are done. Spinning threads on a core
    another program wants are the 20x slowdown (1.0 against 20 tok/s measured, one busy core of two);
    with sleeping threads (PASSIVE) one thread still beats two that share a core (20 against 17 tok/s).
    """

    LOOK_S = 0.5
    # A look this long after the last one follows an idle engine: the average over the gap is what other
    # programs did while it waited (another server answering its own requests), not what they do now.
    # Such a look asks what runs now instead, and starts with every thread unless other programs' threads
    # fill the cores this engine would use (else a short prompt after another program's burst was prefilled
    # on one thread: 213 ms to its first token where 94 would do, tests/bench/vs_llama_server.py). A thread
    # or so on a CPU at that instant is most often a passing one (the client that sent the request, the
    # kernel's network work): seen as a program, it put a request's first half second on one thread. The
    # look after such a start comes QUICK_LOOK_S later, so a program that does go on is met soon.
    STALE_S = 1.0
    QUICK_LOOK_S = 0.1

    def __init__(self, full_threads: int, set_threads: Callable[[int], None], now: float,
                 times: Callable[[], tuple[float, float]] | None = None,
                 running_now: Callable[[], int | None] | None = None):
        """`now`: time.monotonic() at the start (the first look counts from here). `times` (busy CPU seconds of
        the machine and of this process) and `running_now` (threads of other programs on a CPU at this moment,
        None where unknown) default to the system's (tests pass their own)."""
        self.full = full_threads
        self.threads = full_threads
        self._set_threads = set_threads
        self._logical = psutil.cpu_count() or 1
        self._process = psutil.Process()
        self._times = times or self._system_times
        self._running_now = running_now or others_running_now
        self._last_look = now
        self._next_look_s = self.LOOK_S
        self._busy_s, self._own_s = self._times()

    def _system_times(self) -> tuple[float, float]:
        """Busy CPU seconds of the whole machine, and of this process, so far."""
        t = psutil.cpu_times()
        own = self._process.cpu_times()
        # Steal (another VM on the same core) takes the core from a spinner as surely as a program does.
        busy = t.user + t.system + sum(getattr(t, f, 0.0) for f in ("nice", "irq", "softirq", "steal"))
        return busy, own.user + own.system

    def look(self, now: float) -> int:
        """Adjust the threads if LOOK_S has passed since the last look; returns the threads in use."""
        elapsed = now - self._last_look
        if self.full <= 1 or elapsed < self._next_look_s:
            return self.threads
        self._last_look, self._next_look_s = now, self.LOOK_S
        busy, own = self._times()
        others = max(0.0, (busy - self._busy_s) - (own - self._own_s)) / elapsed
        self._busy_s, self._own_s = busy, own
        if elapsed >= self.STALE_S:
            running = self._running_now()
            if running is not None and running < self.full:
                others = 0.0  # they were busy while this engine waited; too little runs now to matter
                self._next_look_s = self.QUICK_LOOK_S
        threads = threads_for(self._logical, others, self.full)
        if threads != self.threads:
            log.info("other programs use %.1f of %d cores: decoding on %d threads", others, self._logical, threads)
            self._set_threads(threads)
            self.threads = threads
        return self.threads


def others_running_now(proc: Path = Path("/proc")) -> int | None:
    """Threads of other programs on a CPU at this moment: the kernel's count of runnable threads, less those
    of this process (the asking one, the one that just handed it a request, an OpenMP thread still spinning)
    and of the Tailor that started it (the window or server, which just sent the request: at a request's
    start one of its threads is often still on a CPU). None where the system does not say (not Linux).
    `proc`: where the kernel's files are."""
    try:
        running = int((proc / "loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    ours = runnable_threads(proc, "self") + runnable_threads(proc, str(os.getppid()))
    return max(0, running - max(1, ours))


def runnable_threads(proc: Path = Path("/proc"), pid: str = "self") -> int:
    """Threads of process `pid` on a CPU or waiting for one (state R in its tasks' stat files), 0 if unknown."""
    try:
        tasks = list((proc / pid / "task").iterdir())
    except OSError:
        return 0
    count = 0
    for task in tasks:
        try:
            stat = (task / "stat").read_bytes()
        except OSError:  # the thread ended meanwhile
            continue
        end = stat.rfind(b")")  # the name, in parentheses, may hold spaces
        count += stat[end + 2 : end + 3] == b"R"
    return count

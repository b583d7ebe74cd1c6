"""Ctrl+C in a terminal: `tailor chat` exits 130 (the README's promise), mid-reply as while loading.

A terminal sends SIGINT to its whole foreground process group, the engine process included; the
tests do the same (the command runs in a session of its own, and the signal goes to the group).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

TAILOR = str(Path(sys.executable).with_name("tailor"))
LONG = "Write a very long story about a dragon who learns to bake bread."


def _as_in_a_terminal() -> None:
    # A shell starts background jobs (a CI script run with `&`) with SIGINT ignored, and children inherit
    # that; a command typed at a terminal has the default disposition.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([TAILOR, "chat", "--max-tokens", "2000", LONG], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_as_in_a_terminal,
                            env={**os.environ, "TAILOR_HOME": str(tmp_path)})


def _wait_for(condition, timeout: float = 120.0) -> None:  # noqa: ANN001 - any callable
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _engines(process: subprocess.Popen[bytes]) -> list[psutil.Process]:
    try:
        return psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _ctrl_c(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    engines = _engines(process)
    os.killpg(process.pid, signal.SIGINT)  # what the terminal does: to every process of the group
    try:
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    gone, alive = psutil.wait_procs(engines, timeout=10)
    assert not alive, "an engine process outlived the command"
    return out, err


def test_ctrl_c_mid_reply_stops_it_and_exits_130(tmp_path: Path):
    process = _start(tmp_path)
    first = b""
    while not first.strip():  # the reply is streaming
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, f"the command ended before any text: {process.stderr.read().decode()}"
        first += chunk
    rest, err = _ctrl_c(process)
    assert process.returncode == 130, err.decode()
    lines = err.decode().splitlines()  # a stopped reply is no error: only the startup line
    assert len(lines) == 1 and lines[0].startswith("tailor: loaded "), err.decode()
    assert (first + rest).strip()  # what was written stays


def _engine_process(process: subprocess.Popen[bytes]) -> psutil.Process | None:
    """The engine process, once the command started it: a child multiprocessing spawned (not its resource
    tracker, nor a program the command runs meanwhile, such as a GPU probe)."""
    for child in _engines(process):
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    return None


def test_ctrl_c_while_the_model_loads_exits_130_with_one_line(tmp_path: Path):
    process = _start(tmp_path)
    _wait_for(lambda: _engine_process(process) is not None or process.poll() is not None)
    assert process.poll() is None, process.stderr.read().decode()
    # Held as soon as it exists (still starting: it has not even read the load request), so the command is
    # surely still waiting for the load when Ctrl+C comes. Held once its model file was mapped instead, a
    # busy machine let the load end between the look and the hold ("loaded" was printed, 1 run in 3 there).
    # The engine would ignore the signal anyway; the command kills it when it does not answer its shutdown.
    engine = _engine_process(process)
    assert engine is not None
    engine.suspend()
    _, err = _ctrl_c(process)
    assert process.returncode == 130, err.decode()
    assert err.decode() == "tailor: interrupted\n"


def test_ctrl_c_mid_reply_with_a_hung_engine_still_exits_130(tmp_path: Path):
    """The reply is cancelled, but the engine never answers (hung; here stopped): the command gives up on it."""
    process = _start(tmp_path)
    first = b""
    while not first.strip():
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, f"the command ended before any text: {process.stderr.read().decode()}"
        first += chunk
    (engine,) = [p for p in _engines(process) if "resource_tracker" not in " ".join(p.cmdline())]
    engine.suspend()
    _, err = _ctrl_c(process)
    assert process.returncode == 130, err.decode()
    lines = err.decode().splitlines()
    assert len(lines) == 2 and lines[0].startswith("tailor: loaded ") and lines[1] == "tailor: interrupted", lines

"""The llama-server harness of the vs_llama_server bench: what it does when llama-server cannot be had, when a
port is taken, and when the bench is interrupted (no server left running)."""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.bench.llama_server import Unavailable, built, free_port, pinned_version, running


def test_the_pin_is_read_from_pyproject(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "x"
        [project.optional-dependencies]
        gguf = ["numpy", "llama-cpp-python==0.3.36"]
    """))
    assert pinned_version(tmp_path / "pyproject.toml") == "0.3.36"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(Unavailable, match="pins no llama-cpp-python"):
        pinned_version(tmp_path / "pyproject.toml")


def test_without_a_compiler_it_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no cmake, no cc, no c++
    with pytest.raises(Unavailable, match="cmake, c\\+\\+, cc not found on PATH"):
        built("0.3.36", build_root=tmp_path / "build")
    assert not (tmp_path / "build" / "0.3.36" / "sdist").exists()  # nothing downloaded for a build that cannot run


def test_a_binary_built_before_is_used_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    binary = tmp_path / "build" / "9.9.9" / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # a rebuild would fail: none is tried
    assert built("9.9.9", build_root=tmp_path / "build") == binary


def test_a_free_port_is_never_one_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        used = taken.getsockname()[1]
        ports = {free_port() for _ in range(20)}
    assert used not in ports


SERVER = textwrap.dedent("""
    import http.server, os, subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(child.pid, flush=True)
    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
""")


def test_an_interrupted_bench_leaves_no_server_or_child_running(tmp_path: Path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    port = free_port()
    log = tmp_path / "server.log"
    with pytest.raises(KeyboardInterrupt), running([sys.executable, str(script), str(port)],
                                                   f"http://127.0.0.1:{port}/", log) as process:
        child = int(log.read_text().split()[0])
        assert psutil.pid_exists(process.pid) and psutil.pid_exists(child)
        raise KeyboardInterrupt  # Ctrl+C in the middle of the bench
    assert process.poll() is not None
    # The group's SIGTERM reaches the server's own child too; it dies on its own time: wait for that.
    try:
        _, alive = psutil.wait_procs([psutil.Process(child)], timeout=30)
    except psutil.NoSuchProcess:
        alive = []
    assert all(p.status() == psutil.STATUS_ZOMBIE for p in alive), alive


def test_a_server_that_dies_before_it_is_ready_is_named_with_its_log(tmp_path: Path):
    port = free_port()
    with pytest.raises(RuntimeError, match=r"exited with 3 before it was ready: see .*dies\.log"), \
            running([sys.executable, "-c", "import sys; sys.exit(3)"], f"http://127.0.0.1:{port}/",
                    tmp_path / "dies.log"):
        pass
    assert os.path.exists(tmp_path / "dies.log")

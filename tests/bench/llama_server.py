"""llama.cpp's own `llama-server`, built from the pinned llama-cpp-python's vendored sources, for side-by-side
benches (vs_llama_server.py). Not a benchmark itself: it has no `main`, so `make bench` passes it by.

The build is the one llama.cpp documents (`cmake --build build --target llama-server`), CPU, portable
(GGML_NATIVE=OFF, as Tailor's own wheel), Release, static libraries; it goes to build/llama-server/<version>/
and is made once (about 10 minutes on two cores). The sources are the sdist pip downloads for the pin in
pyproject.toml (pip's cache keeps it). Where a compiler, cmake or the sdist is missing, `built` raises
Unavailable with what is missing, and the bench prints Tailor's figures alone.

    python -m tests.bench.llama_server          # build it (or say where it is)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "llama-server"
CMAKE_ARGS = ("-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
              "-DLLAMA_BUILD_SERVER=ON", "-DBUILD_SHARED_LIBS=OFF", "-DCMAKE_BUILD_TYPE=Release")


class Unavailable(Exception):
    """llama-server cannot be had here; the message says what is missing."""


def pinned_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The llama-cpp-python version pyproject.toml pins (its gguf extra)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    for req in project.get("optional-dependencies", {}).get("gguf", []):
        match = re.match(r"llama[-_]cpp[-_]python\s*==\s*([\w.]+)", req)
        if match:
            return match.group(1)
    raise Unavailable("pyproject.toml pins no llama-cpp-python==VERSION in its gguf extra")


def built(version: str | None = None, build_root: Path = BUILD, log: Path | None = None) -> Path:
    """The llama-server binary for the pinned version, built first where it is not yet (Unavailable if it
    cannot be)."""
    version = version or pinned_version()
    home = build_root / version
    binary = home / "build" / "bin" / "llama-server"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    missing = [tool for tool in ("cmake", "c++", "cc") if shutil.which(tool) is None]
    if missing:
        raise Unavailable(f"cannot build llama-server: {', '.join(missing)} not found on PATH")
    home.mkdir(parents=True, exist_ok=True)
    source = _vendored_source(version, home)
    log = log or home / "build.log"
    print(f"building llama-server {version} from {source} (once; about 10 minutes on two cores; log: {log})",
          flush=True)
    with log.open("w") as out:
        for step in (["cmake", "-S", str(source), "-B", str(home / "build"), *CMAKE_ARGS],
                     ["cmake", "--build", str(home / "build"), "--target", "llama-server",
                      "-j", str(os.cpu_count() or 2)]):
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                raise Unavailable(f"building llama-server failed at `{' '.join(step[:3])} …`: see {log}")
    if not binary.is_file():
        raise Unavailable(f"the llama-server build made no {binary}: see {log}")
    return binary


def _vendored_source(version: str, home: Path) -> Path:
    """llama.cpp's sources as the sdist of llama-cpp-python `version` vendors them, unpacked under `home`."""
    source = home / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    if (source / "CMakeLists.txt").is_file():
        return source
    sdists = home / "sdist"
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                f"llama-cpp-python=={version}", "-d", str(sdists)]
    if subprocess.run(download, capture_output=True, text=True).returncode != 0:
        raise Unavailable(f"cannot download llama-cpp-python {version}'s sources (pip download failed)")
    archive = next(sdists.glob("llama_cpp_python-*.tar.gz"), None)
    if archive is None:
        raise Unavailable(f"pip download gave no sdist of llama-cpp-python {version}")
    with tarfile.open(archive) as tar:
        tar.extractall(home, filter="data")
    if not (source / "CMakeLists.txt").is_file():
        raise Unavailable(f"the sdist of llama-cpp-python {version} has no vendor/llama.cpp")
    return source


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the system picks it, so one in use is never given)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running(command: Sequence[str], ready_url: str, log: Path, env: dict[str, str] | None = None,
            timeout_s: float = 300.0) -> Iterator[subprocess.Popen]:
    """`command` started in a process group of its own, yielded once `ready_url` answers 200; the whole group
    stopped on the way out, whatever ends the block (an exception, Ctrl+C): no server is left running."""
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{Path(command[0]).name} exited with {process.returncode} before it was "
                                   f"ready: see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{Path(command[0]).name} was not ready in {timeout_s:.0f} s: see {log}")
            time.sleep(0.1)
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the process's group, SIGKILL if it is still there after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait_s)


def _build() -> None:
    try:
        print(built())
    except Unavailable as exc:
        print(f"llama-server unavailable: {exc}")


if __name__ == "__main__":
    _build()

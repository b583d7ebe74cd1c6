"""The double-click bundle (dist/tailor, `make package`), started as a user would: `make test-package`.

Each run gets a temporary TAILOR_HOME and HOME, no virtualenv or PYTHONPATH, the Hugging Face hub offline,
and the window on Qt's offscreen platform. The bundle is built first when it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import psutil
import pytest

from engine.process_log import process_logs
from engine.starter import BUNDLED_STARTER_DIR, STARTER_FILE
from models.units import human_size

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "dist" / "tailor"
EXE = BUNDLE / "tailor"
BUNDLED_STARTER = BUNDLE / "_internal" / BUNDLED_STARTER_DIR / STARTER_FILE
LOAD_S = 120  # the whole load of the starter on a busy 2-core machine stays far below this
CAPITAL = "What is the capital of France?"


def _tree_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def bundle() -> Path:
    if not EXE.exists():
        subprocess.run(["make", "package"], cwd=ROOT, check=True, timeout=1800)
    size = _tree_size(BUNDLE)
    parts = {p.name: _tree_size(p) for p in (BUNDLE / "_internal").iterdir() if p.is_dir()}
    largest = ", ".join(f"{name} {human_size(n)}" for name, n in sorted(parts.items(), key=lambda kv: -kv[1])[:5])
    print(f"\nbundle {BUNDLE}: {human_size(size)} ({size:,} bytes); largest parts: {largest}")
    return EXE


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A user's environment: nothing of this checkout's Python, an empty home, no network for the hub."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    clean["PATH"] = os.pathsep.join(p for p in clean.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    (tmp_path / "user").mkdir()
    clean.update(TAILOR_HOME=str(tmp_path / "tailor-home"), HOME=str(tmp_path / "user"),
                 XDG_RUNTIME_DIR=str(tmp_path / "user"), QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1")
    return clean


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = LOAD_S) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXE), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _wait_for(check: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:.0f}s for {what}")


def _engine_log(env: dict[str, str]) -> str:
    files = process_logs(Path(env["TAILOR_HOME"]) / "logs" / "engine.log")
    return "".join(path.read_text(encoding="utf-8", errors="replace") for path in files)


def test_version(bundle: Path, env: dict[str, str], tmp_path: Path):
    result = _run(["--version"], env, tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == f"tailor {metadata.version('tailor')}"


def test_chat_answers_from_the_bundled_starter_model(bundle: Path, env: dict[str, str], tmp_path: Path):
    result = _run(["chat", CAPITAL, "--temperature", "0", "--max-tokens", "24", "--json"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    answer, stats_line = result.stdout.strip().rsplit("\n", 1)
    print(f"\nfirst answer from the bundle: {answer!r}\nstats: {stats_line}")
    assert "Paris" in answer
    assert json.loads(stats_line)["gen_tokens"] > 0
    # llama.cpp names the file it loaded: the copy inside the bundle, not a package of this checkout.
    assert f"from {BUNDLED_STARTER}" in _engine_log(env)


def test_the_reply_streams_and_ctrl_c_stops_it(bundle: Path, env: dict[str, str], tmp_path: Path):
    prompt = "Write a very long story about a dragon who learns to bake bread."
    process = subprocess.Popen([str(EXE), "chat", prompt, "--max-tokens", "2000"], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = b""
        while not first.strip():  # the first words arrive while the reply is still being written...
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, f"the CLI ended before any text: {process.stderr.read().decode()}"
            first += chunk
        process.send_signal(signal.SIGINT)  # ...so Ctrl+C can still stop it
        rest, err = process.communicate(timeout=LOAD_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err.decode()  # cancelled: it was mid-reply
    assert len((first + rest).split()) >= 1


def test_the_window_starts_its_engine_from_the_bundle_and_stays_single(
        bundle: Path, env: dict[str, str], tmp_path: Path):
    window = subprocess.Popen([str(EXE)], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        gui = psutil.Process(window.pid)

        def engine_child() -> psutil.Process | None:
            for child in gui.children():
                try:
                    if "--multiprocessing-fork" in child.cmdline():
                        return child
                except (psutil.ZombieProcess, psutil.NoSuchProcess):  # short-lived helpers (ldconfig, …)
                    continue
            return None

        engine = _wait_for(engine_child, LOAD_S, "the engine child process")
        # The spawned child is the bundle's own executable again (freeze_support), not a Python of this machine.
        assert Path(engine.exe()).resolve() == EXE.resolve()
        _wait_for(lambda: f"from {BUNDLED_STARTER}" in _engine_log(env), LOAD_S, "the starter model to load")
        second = _run([], env, tmp_path, timeout=60)  # a second double-click
        assert second.returncode == 0 and window.poll() is None  # it focused the first window and left
        window.terminate()
        window.wait(30)
        psutil.wait_procs([engine], timeout=30)
        assert not engine.is_running()  # the engine does not outlive its window
    finally:
        if window.poll() is None:
            window.kill()
            window.wait(10)


def test_pytorch_is_left_out_and_gguf_libraries_are_in(bundle: Path):
    internal = BUNDLE / "_internal"
    assert not (internal / "torch").exists() and not (internal / "transformers").exists()
    assert any((internal / "llama_cpp" / "lib").glob("libllama*"))
    assert BUNDLED_STARTER.is_file()


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils not installed")
def test_install_desktop_entry_points_the_menu_at_the_bundle(bundle: Path, tmp_path: Path):
    data = tmp_path / "share"
    env = dict(os.environ, XDG_DATA_HOME=str(data))
    subprocess.run([str(BUNDLE / "install-desktop-entry.sh")], env=env, check=True, capture_output=True, timeout=60)
    entry = data / "applications" / "tailor.desktop"
    assert f'Exec="{EXE}"' in entry.read_text()
    assert subprocess.run(["desktop-file-validate", str(entry)], capture_output=True).returncode == 0
    for size in (16, 48, 256, 512):
        assert (data / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "tailor.png").is_file()

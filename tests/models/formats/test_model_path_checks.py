"""A FIFO, a device or a socket given as a model is refused at once, by every reader of a model path.

Each call runs on a thread with a deadline: a reader that opens the FIFO blocks until a writer
comes, so the test then plays the writer (unblocking it) and fails instead of hanging.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.gguf.file_check import InvalidModelFile as EngineInvalidModelFile
from engine.gguf.file_check import check_gguf_path
from engine.torch.model_config import CheckpointError, ModelConfig
from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import read_gguf_header
from models.formats.hf_config import read_hf_config
from models.formats.local_file import check_regular_file, open_regular_file
from models.formats.safetensors_header import read_safetensors_header
from models.library import ModelStore, StoreError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
TAILOR = str(Path(sys.executable).with_name("tailor"))
FIFO_WORDS = "is a FIFO (named pipe), not a regular file"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _unblock(fifo: Path) -> None:
    """Be the writer a reader blocked on `fifo` waits for, then hang up (it reads an empty file)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # nobody is reading
        return
    os.close(fd)


def _outcome(call: Callable[[], object], fifos: list[Path], deadline_s: float = 20.0) -> BaseException | None:
    """What `call` raised (None if it returned), or fail if it is still blocked after the deadline."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result.append(exc)
        else:
            result.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        while thread.is_alive():
            for fifo in fifos:
                _unblock(fifo)
            thread.join(0.1)
        pytest.fail(f"blocked on a FIFO for {deadline_s:g} s instead of refusing it")
    return result[0]


def test_the_shared_check_names_what_the_file_is(tmp_path: Path):
    fifo = _fifo(tmp_path / "model.gguf")
    for check in (open_regular_file, check_regular_file):
        error = _outcome(lambda check=check: check(fifo), [fifo])
        assert isinstance(error, InvalidModelFile) and str(error) == f"{fifo}: {FIFO_WORDS}; refusing to read it"
    error = _outcome(lambda: open_regular_file("/dev/zero"), [])
    assert isinstance(error, InvalidModelFile) and "is a character device, not a regular file" in str(error)
    sock_path = tmp_path / "s.gguf"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock_path))
        error = _outcome(lambda: open_regular_file(sock_path), [])
    assert isinstance(error, InvalidModelFile) and "is a socket, not a regular file" in str(error)
    regular = tmp_path / "real.gguf"
    regular.write_bytes(b"GGUF" + bytes(20))
    with open_regular_file(regular) as f:  # a regular file still opens, reading blocking as usual
        assert f.read() == b"GGUF" + bytes(20)
    link = tmp_path / "link.gguf"
    link.symlink_to(fifo)
    error = _outcome(lambda: open_regular_file(link), [fifo])
    assert isinstance(error, InvalidModelFile) and FIFO_WORDS in str(error)


def test_every_header_and_config_reader_refuses_a_fifo(tmp_path: Path):
    fifo = _fifo(tmp_path / "model.gguf")
    for read in (read_gguf_header, read_safetensors_header, read_hf_config):
        error = _outcome(lambda read=read: read(fifo), [fifo])
        assert isinstance(error, InvalidModelFile) and FIFO_WORDS in str(error), read


def test_the_engines_checks_refuse_a_fifo(tmp_path: Path):
    fifo = _fifo(tmp_path / "model.gguf")
    error = _outcome(lambda: check_gguf_path(fifo), [fifo])
    assert isinstance(error, EngineInvalidModelFile) and str(error).startswith(f"model.gguf: {FIFO_WORDS}")

    folder = tmp_path / "folder"
    folder.mkdir()
    config = _fifo(folder / "config.json")
    error = _outcome(lambda: ModelConfig.from_dir(folder), [config])
    assert isinstance(error, CheckpointError) and str(error).startswith(f"{config}: {FIFO_WORDS}")
    # A folder whose config.json is a FIFO is not taken for a model folder; the GGUF check says why.
    error = _outcome(lambda: check_gguf_path(folder), [config])
    assert isinstance(error, EngineInvalidModelFile) and str(error).startswith(f"{config}: {FIFO_WORDS}")


def test_the_torch_engines_folder_files_refuse_a_fifo(tmp_path: Path):
    pytest.importorskip("torch")
    from engine.torch.checkpoint import safetensors_files
    from engine.torch.hf_tokenizer import HfTokenizer
    from tests.fixtures.tiny_hf import write_tokenizer

    folder = tmp_path / "m"
    folder.mkdir()
    shard = _fifo(folder / "model.safetensors")
    error = _outcome(lambda: safetensors_files(folder), [shard])
    assert isinstance(error, CheckpointError) and FIFO_WORDS in str(error)

    write_tokenizer(folder)
    for name in ("tokenizer_config.json", "tokenizer.json"):
        target = folder / name
        target.unlink()
        _fifo(target)
        error = _outcome(lambda: HfTokenizer(folder), [target])
        assert isinstance(error, CheckpointError) and str(error).startswith(f"{target}: {FIFO_WORDS}"), name
        target.unlink()
        write_tokenizer(folder)


def test_the_library_refuses_to_import_a_fifo(tmp_path: Path):
    fifo = _fifo(tmp_path / "model.gguf")
    store = ModelStore(data_dir=tmp_path / "data", cache_dir=tmp_path / "cache")
    error = _outcome(lambda: store.import_gguf(fifo), [fifo])
    assert isinstance(error, StoreError) and FIFO_WORDS in str(error)
    assert store.list().imported == ()


def test_the_load_planner_returns_at_once(tmp_path: Path):
    """The window's Open dialog and `tailor chat` plan the load first: a FIFO gets no plan, no hang."""
    from app.services.load_settings import LoadSettings
    from app.services.planning.load_planner import LoadPlanner
    from models.hardware.profile import HardwareProfile

    fifo = _fifo(tmp_path / "model.gguf")
    planned: list = []
    profile = HardwareProfile(gpus=(), ram_total_bytes=16 << 30, ram_available_bytes=8 << 30, cpu_physical_cores=2,
                              cpu_logical_cores=4, cpu_name="test CPU", source="none: injected")
    planner = LoadPlanner(profile=profile, status_dir=tmp_path / "status")
    assert _outcome(lambda: planned.append(planner.plan_load(str(fifo), LoadSettings(n_ctx=512))), [fifo]) is None
    assert planned[0].plan is None  # the engine then says why


def _tailor(*args: str, home: Path, fifos: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAILOR_HOME": str(home)}
    process = subprocess.Popen([TAILOR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        for fifo in fifos:
            _unblock(fifo)
        process.kill()
        process.communicate()
        pytest.fail(f"tailor {' '.join(args)} hung on a FIFO")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize("command", ["plan", "chat"])
def test_the_cli_says_it_in_one_line(tmp_path: Path, command: str):
    fifo = _fifo(tmp_path / "model.gguf")
    args = ("plan", "--file", str(fifo)) if command == "plan" else ("chat", "--model", str(fifo), "hello")
    result = _tailor(*args, home=tmp_path / "home", fifos=[fifo])
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tailor: error: ") and FIFO_WORDS in lines[0], result.stderr
    assert "model.gguf" in lines[0] and result.stdout == ""


def test_the_cli_refuses_a_folder_whose_config_is_a_fifo(tmp_path: Path):
    folder = tmp_path / "folder"
    folder.mkdir()
    config = _fifo(folder / "config.json")
    for args in (("plan", "--file", str(folder)), ("chat", "--model", str(folder), "hello")):
        result = _tailor(*args, home=tmp_path / "home", fifos=[config])
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1, result.stderr
        assert f"{config}: {FIFO_WORDS}" in lines[0]

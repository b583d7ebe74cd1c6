"""One log file per process: concurrent writers lose nothing, old files are pruned, native crashes leave a trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine.client import EngineClient
from engine.process_log import (
    latest_process_log,
    process_log_path,
    process_logs,
    prune_process_logs,
)
from engine.protocol import ChatMessage, Error, Loaded, SamplingParams, Token
from tests.engine.helpers import load, wait_for

RECORDS = 3000
# Each writer logs through the real handler with a tiny size cap, so it rotates many times meanwhile.
WRITER = """
import logging, sys
from pathlib import Path
from engine.process_log import ProcessLogHandler, process_log_path
handler = ProcessLogHandler(process_log_path(Path(sys.argv[1])), max_bytes=int(sys.argv[3]))
root = logging.getLogger()
root.addHandler(handler)
root.setLevel(logging.INFO)
for i in range(int(sys.argv[2])):
    logging.getLogger("w").info("record %d of %s", i, sys.argv[4])
"""


def test_two_processes_logging_at_once_each_keep_every_record(tmp_path: Path):
    base = tmp_path / "engine.log"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(base), str(RECORDS), str(10**9), name])
        for name in ("alpha", "beta")
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    files = process_logs(base)
    assert len(files) == 2 and base not in files
    for name in ("alpha", "beta"):
        (mine,) = [f for f in files if f"of {name}" in f.read_text()]
        lines = mine.read_text().splitlines()
        # Exactly this writer's records, all of them, in order: no other process wrote into its file.
        assert [line.rsplit(" record ", 1)[1] for line in lines] == [f"{i} of {name}" for i in range(RECORDS)]


def test_a_file_that_rotates_keeps_one_backup_of_this_process_only(tmp_path: Path):
    base = tmp_path / "tailor.log"
    result = subprocess.run([sys.executable, "-c", WRITER, str(base), "2000", "20000", "solo"], timeout=120)
    assert result.returncode == 0
    (current,) = process_logs(base)
    backup = current.with_name(current.name + ".1")
    assert backup.exists() and current.stat().st_size <= 20000
    last = current.read_text().splitlines()[-1]
    assert last.endswith("record 1999 of solo")


def test_the_file_is_named_after_its_kind_start_and_pid(tmp_path: Path):
    started = time.mktime((2026, 12, 1, 8, 3, 12, 0, 0, -1))
    assert process_log_path(tmp_path / "engine.log", pid=4242, started=started).name == "engine-20261201-080312-4242.log"


def test_pruning_keeps_the_newest_and_any_recently_written(tmp_path: Path):
    base = tmp_path / "engine.log"
    now = time.time()
    for i in range(6):
        path = tmp_path / f"engine-2026010{i}-000000-{100 + i}.log"
        path.write_text("x")
        path.with_name(path.name + ".1").write_text("old")
        age = 10 * 3600 if i < 4 else 60  # the two newest were written a minute ago
        os.utime(path, (now - age + i, now - age + i))
    (tmp_path / "tailor-20260101-000000-1.log").write_text("another kind")
    removed = prune_process_logs(base, keep=1, now=now)
    assert sorted(p.name for p in removed) == [f"engine-2026010{i}-000000-{100 + i}.log" for i in range(4)]
    assert [p.name for p in process_logs(base)] == ["engine-20260104-000000-104.log", "engine-20260105-000000-105.log"]
    assert not (tmp_path / "engine-20260100-000000-100.log.1").exists()
    assert (tmp_path / "tailor-20260101-000000-1.log").exists()


def test_latest_is_none_without_a_log_folder(tmp_path: Path):
    assert latest_process_log(tmp_path / "missing" / "engine.log") is None


def test_a_native_crash_of_the_engine_leaves_its_python_stack_in_the_log(starter_model: Path, tmp_path: Path):
    base = tmp_path / "logs" / "engine.log"
    client = EngineClient(log_path=base)
    client.start()
    try:
        assert isinstance(load(client, str(starter_model)), Loaded)
        client.generate([ChatMessage("user", "Tell me a long story.")], SamplingParams(max_tokens=400))
        assert isinstance(wait_for(client, (Token,)), Token)
        # What a segfault inside llama.cpp delivers; faulthandler's handler runs as for a real one.
        os.kill(client.pid, signal.SIGSEGV)
        died = wait_for(client, ())
        assert isinstance(died, Error) and died.kind == "engine_died"
    finally:
        client.shutdown()
    text = latest_process_log(base).read_text(errors="replace")
    assert "Fatal Python error: Segmentation fault" in text
    assert "engine/host.py" in text.replace("\\", "/")


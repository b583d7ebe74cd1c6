"""A folder indexed in a child process: progress and the report come back through the pipe; a child that dies
or cannot write its index is said in one line, never a hang."""

from __future__ import annotations

import os
import signal
import threading

from app.services.documents.index_process import IndexProcess
from app.services.documents.knowledge import open_knowledge

WAIT_S = 60


class Outcome:
    def __init__(self):
        self.progress, self.finished, self.failed = [], [], []
        self.ended = threading.Event()

    def process(self, data_dir, name, folder) -> IndexProcess:
        def end(box, value):
            box.append(value)
            self.ended.set()

        return IndexProcess(data_dir, name, folder, self.progress.append, lambda r: end(self.finished, r),
                            lambda why: end(self.failed, why))


def notes(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(3):
        (folder / f"note-{n}.md").write_text(f"# Note {n}\n\nThe tide tables for week {n} are pinned by the door.\n")
    return folder


def test_progress_then_the_report_and_the_index_holds_the_folder(tmp_path):
    outcome = Outcome()
    job = outcome.process(tmp_path / "data", "tides", notes(tmp_path))
    job.start()
    assert outcome.ended.wait(WAIT_S) and job.wait(WAIT_S)
    (done,) = outcome.finished
    assert len(done.report.indexed) == 3 and done.embedded is None and outcome.failed == []
    assert [p.files_done for p in outcome.progress] == [1, 2, 3]
    with open_knowledge(tmp_path / "data", "tides") as index:
        assert index.counts()[0] == 3 and "week 2" in index.search("tide tables week 2", 1)[0].text


def test_a_child_killed_says_so_in_one_line(tmp_path):
    outcome = Outcome()
    job = outcome.process(tmp_path / "data", "tides", notes(tmp_path))
    job.start()
    os.kill(job._process.pid, signal.SIGKILL)  # at once: a spawned child is still starting its interpreter
    assert outcome.ended.wait(WAIT_S) and job.wait(WAIT_S)
    assert outcome.finished == []
    assert outcome.failed == ["the indexing process ended without finishing (exit code -9)"]


def test_an_index_that_cannot_be_written_is_named(tmp_path):
    outcome = Outcome()
    blocked = tmp_path / "data"
    blocked.write_text("a file where the data folder should be")
    job = outcome.process(blocked, "tides", notes(tmp_path))
    job.start()
    assert outcome.ended.wait(WAIT_S) and job.wait(WAIT_S)
    (why,) = outcome.failed
    assert "File exists" in why or "Not a directory" in why

"""A context the plan says does not fit is refused before anything loads: by the planner, for every front
end; `tailor serve` and `tailor chat` say so in one line and exit 1, without starting a load.

`--ctx 99999999` on the starter model once took 15 to 23 s and grew to 5.2 GB before llama.cpp's allocation
of a 2.3 TB KV cache failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.services.load_settings import LoadSettings
from app.services.paths import AppPaths
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for

HUGE = 99_999_999
REFUSED = (f"A context of {HUGE:,} tokens does not fit here: it needs 2146.0 GiB of memory with this model; "
           "the most that fits is 8,192 tokens, the model's trained length.")


def test_the_plan_refuses_a_context_past_what_fits(starter_model: Path, tmp_path: Path):
    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)
    assert planner.plan_load(str(starter_model), LoadSettings(n_ctx=HUGE)).refusal == REFUSED
    # Auto sizes its own context; 16,384 is past the trained length (8,192) but fits, as llama.cpp allows.
    for n_ctx in (None, 2048, 8192, 16384):
        assert planner.plan_load(str(starter_model), LoadSettings(n_ctx=n_ctx)).refusal is None, n_ctx


def test_on_a_tight_machine_it_names_the_most_that_fits(starter_model: Path, tmp_path: Path):
    tight = LoadPlanner(profile_for(ram_gib=2.2), status_dir=tmp_path)
    most = tight.plan_load(str(starter_model), LoadSettings(n_ctx=None)).plan.max_context
    assert 0 < most < 8192  # what this machine is for: some context fits, less than the trained length
    refusal = tight.plan_load(str(starter_model), LoadSettings(n_ctx=8192)).refusal
    assert refusal is not None and refusal.startswith("A context of 8,192 tokens does not fit here: it needs ")
    assert refusal.endswith(f"; the most that fits is {most:,} tokens.")
    assert tight.plan_load(str(starter_model), LoadSettings(n_ctx=most)).refusal is None


# Runs the command in a process of its own and reports, as JSON, its exit status, its stderr and the
# largest resident size (KiB) of it and every process it waited for (the engine, had it started).
_MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "app.launcher", *sys.argv[1:]], capture_output=True, text=True)
print(json.dumps([done.returncode, done.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))
"""


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["chat", "Hi"]])
def test_the_cli_says_it_in_one_line_without_loading(starter_model: Path, command: list[str]):
    # The command inherits this test's TAILOR_HOME (tests/conftest.py): its logs go there.
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command, "--ctx", str(HUGE)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    status, stderr, max_rss_kib = json.loads(out)
    assert status == 1
    assert stderr == f"tailor: error: {REFUSED}\n"
    assert max_rss_kib < 1024 * 1024, f"{max_rss_kib / 1024:.0f} MiB: something was allocated"
    # Each engine process writes its own engine-<start>-<pid>.log: `tailor serve` refuses before its engine
    # starts (`tailor chat` starts its engine first, and asks it for nothing).
    engines = list(AppPaths.default().log_dir.glob("engine-*.log"))
    assert len(engines) == (0 if command[0] == "serve" else 1), engines

"""Context: Auto through the front ends: the load planner turns it into a number for the engine,
`tailor plan` prints the largest context that fits, and `tailor chat --ctx auto` loads with it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.services.chat_defaults import DEFAULT_N_CTX
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.plan.context import AUTO_CONTEXT_CAP
from models.plan.folder_plan import folder_candidate, plan_folder
from models.plan.forecast import KV_PADDING
from models.plan.machine import Machine
from tests.fixtures.tiny_hf import big_folder

TAILOR = str(Path(sys.executable).with_name("tailor"))
STARTER_TRAINED = 8192  # SmolLM2-135M-Instruct's n_ctx_train
# A hypothetical machine whose RAM holds the starter model with less than its trained context.
SMALL_RAM = ("--ram", "2.3")
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}


def tailor(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAILOR_HOME": str(home)}
    return subprocess.run([TAILOR, *args], capture_output=True, text=True, timeout=180, env=env)


def plan_json(*args: str, home: Path) -> dict:
    result = tailor("plan", "--json", *args, home=home)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- the load planner -----------------------------------------------------------------------------


def test_auto_becomes_the_plans_context_in_the_request(starter_model: Path):
    roomy = LoadPlanner(profile_for(ram_gib=16))
    planned = roomy.plan_load(str(starter_model), LoadSettings())  # n_ctx None: auto
    assert planned.plan.context == planned.plan.max_context == STARTER_TRAINED
    assert planned.request.n_ctx == STARTER_TRAINED
    capped = roomy.plan_load(str(starter_model), LoadSettings(n_ctx=None, auto_ctx_cap=3072))
    assert capped.request.n_ctx == capped.plan.context == 3072
    tight = LoadPlanner(profile_for(ram_gib=2.3)).plan_load(str(starter_model), LoadSettings())
    assert 2048 <= tight.request.n_ctx == tight.plan.max_context < STARTER_TRAINED
    fixed = roomy.plan_load(str(starter_model), LoadSettings(4096))
    assert fixed.request.n_ctx == 4096 and fixed.plan.max_context == STARTER_TRAINED


def test_auto_without_a_readable_header_loads_the_default_and_logs_why(truncated_model: Path,
                                                                       caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="app.services.planning.load_planner"):
        planned = LoadPlanner(profile_for(ram_gib=16)).plan_load(str(truncated_model), LoadSettings())
    assert planned.plan is None and planned.request.n_ctx == DEFAULT_N_CTX
    assert any("context: auto needs a plan" in r.getMessage() and truncated_model.name in r.getMessage()
               for r in caplog.records)


def test_auto_for_a_model_folder(tmp_path: Path):
    folder = big_folder(tmp_path / "big-awq", AWQ)
    rtx_4090 = Machine.from_profile(profile_for("RTX 4090", ram_gib=64))
    candidate = folder_candidate(folder)
    plan = plan_folder(rtx_4090, candidate, context=None)
    most = plan.max_context
    assert plan.fits and plan.context == AUTO_CONTEXT_CAP < most < candidate.shape.n_ctx_train
    assert plan_folder(rtx_4090, candidate, context=most).fits
    assert not plan_folder(rtx_4090, candidate, context=most + KV_PADDING).fits
    assert plan.reasons[-1] == f"Context: auto — 32,768 tokens (the auto cap; {most:,} would fit)."
    assert plan_folder(rtx_4090, candidate, context=None, auto_context_cap=1 << 20).context == most
    planned = LoadPlanner(profile_for("RTX 4090", ram_gib=64)).plan_load(str(folder), LoadSettings())
    assert planned.request.n_ctx == AUTO_CONTEXT_CAP
    (folder / "config.json").write_text("{not json")
    unreadable = LoadPlanner(profile_for("RTX 4090", ram_gib=64)).plan_load(str(folder), LoadSettings())
    assert unreadable.plan is None and unreadable.request.n_ctx == DEFAULT_N_CTX


# -- tailor plan ----------------------------------------------------------------------------------


def test_tailor_plan_prints_the_largest_context_that_fits(starter_model: Path, tmp_path: Path):
    d = plan_json("--file", str(starter_model), *SMALL_RAM, home=tmp_path)
    most = d["max_context"]
    assert d["fits"] and 2048 <= most < STARTER_TRAINED and d["context"] == most  # auto is the default
    human = tailor("plan", "--file", str(starter_model), *SMALL_RAM, home=tmp_path).stdout
    assert f"  largest context that fits: {most:,} tokens\n" in human
    assert f"  - Q4_1 fits in RAM up to {most:,} tokens of context.\n" in human
    assert f"  - Context: auto — {most:,} tokens (the most that fits).\n" in human
    # the figure is the edge: a fixed context of it fits, 256 more does not
    assert plan_json("--file", str(starter_model), *SMALL_RAM, "--ctx", str(most), home=tmp_path)["fits"]
    over = plan_json("--file", str(starter_model), *SMALL_RAM, "--ctx", str(most + KV_PADDING), home=tmp_path)
    assert not over["fits"] and over["max_context"] == most
    # a cap between two of llama.cpp's 256-token steps takes the lower one
    capped = plan_json("--file", str(starter_model), *SMALL_RAM, "--ctx", "auto", "--ctx-cap", "3000", home=tmp_path)
    assert capped["context"] == 2816 and capped["max_context"] == most


def test_tailor_plan_context_options_are_checked(starter_model: Path, tmp_path: Path):
    bad = tailor("plan", "--file", str(starter_model), "--ctx", "lots", home=tmp_path)
    assert bad.returncode == 2 and "must be auto or a positive integer, not lots" in bad.stderr
    both = tailor("plan", "--file", str(starter_model), "--ctx", "4096", "--ctx-cap", "8192", home=tmp_path)
    assert both.returncode == 1 and both.stdout == ""
    assert both.stderr == "tailor: error: --ctx-cap is the most tokens --ctx auto picks: it does nothing with --ctx 4096\n"


# -- tailor chat ----------------------------------------------------------------------------------


def test_chat_with_auto_loads_the_context_the_plan_chose(starter_model: Path, tmp_path: Path):
    chosen = plan_json("--file", str(starter_model), "--ctx-cap", "3072", home=tmp_path)  # this machine
    assert chosen["context"] == 3072 and chosen["max_context"] == STARTER_TRAINED
    result = tailor("chat", "--ctx", "auto", "--ctx-cap", "3072", "--temperature", "0", "--max-tokens", "4", "Hi",
                    home=tmp_path)
    assert result.returncode == 0, result.stderr
    # The engine's own figure (ModelInfo.n_ctx), as the startup line prints it.
    (line,) = result.stderr.splitlines()
    assert line.startswith("tailor: loaded Smollm2 135M")  # the name in the file's metadata
    assert line.endswith(" with 3,072 tokens of context (auto: the cap; 8,192 would fit, see --ctx-cap)")
    assert result.stdout.strip()


def test_chat_defaults_to_auto_and_a_number_still_works(tmp_path: Path):
    auto = tailor("chat", "--temperature", "0", "--max-tokens", "2", "Hi", home=tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert auto.stderr.endswith(f"with {STARTER_TRAINED:,} tokens of context (auto: the model's trained length)\n")
    fixed = tailor("chat", "--ctx", "2048", "--temperature", "0", "--max-tokens", "2", "Hi", home=tmp_path)
    assert fixed.returncode == 0 and fixed.stderr.endswith("with 2,048 tokens of context\n"), fixed.stderr
    both = tailor("chat", "--ctx", "2048", "--ctx-cap", "4096", "Hi", home=tmp_path)
    assert both.returncode == 1 and "--ctx-cap is the most tokens --ctx auto picks" in both.stderr
    bad = tailor("chat", "--ctx", "0", "Hi", home=tmp_path)
    assert bad.returncode == 2 and "must be auto or a positive integer, not 0" in bad.stderr

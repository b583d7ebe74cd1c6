"""The largest context that fits (Plan.max_context) and Context: Auto (make_plan(context=None)).

The GPU machine is what NVML reports through the fake RTX 4090 (tests/fixtures/fake_nvml.py), with
its RAM pinned so this machine's does not change the answers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.hardware.profile import detect_hardware
from models.plan.candidates import Candidate, gguf_candidates
from models.plan.context import AUTO_CONTEXT_CAP, AUTO_WALK_CONTEXT, MIN_CONTEXT
from models.plan.decision_tree import Plan, make_plan
from models.plan.forecast import KV_PADDING
from models.plan.machine import Machine
from models.units import GIB
from tests.fixtures.fake_nvml import OneGpuNvml
from tests.models.plan.test_decision_tree import (
    GB,
    LLAMA_8B,
    LLAMA_70B,
    REPO_8B,
    REPO_70B,
    llama_shape,
    machine,
)

FAKE_4090 = replace(Machine.from_profile(detect_hardware(OneGpuNvml())), ram_available_bytes=64 * GIB)
CPU_16 = machine(None, ram_gib=16)
CPU_256 = machine(None, ram_gib=256)
RTX_3060 = machine("NVIDIA GeForce RTX 3060", 12, cc=(8, 6))


def one(repo: list[Candidate], quant: str) -> list[Candidate]:
    return [c for c in repo if c.quant == quant]


def same_placement(a: Plan, b: Plan) -> bool:
    return a.fits and b.fits and (a.files, a.n_gpu_layers) == (b.files, b.n_gpu_layers)


@pytest.mark.parametrize(
    ("name", "m", "candidates", "placement"),
    [
        ("8B Q4_K_M in 16 GB of RAM", CPU_16, one(REPO_8B, "Q4_K_M"), "cpu"),
        ("8B F16 on the fake 4090", FAKE_4090, one(REPO_8B, "F16"), "gpu"),
        ("8B Q8_0 on a 3060", RTX_3060, one(REPO_8B, "Q8_0"), "gpu"),
        ("70B Q4_K_M split between the fake 4090 and RAM", FAKE_4090, one(REPO_70B, "Q4_K_M"), "partial"),
    ],
)
def test_max_context_is_the_largest_that_fits(name, m, candidates, placement):
    plan = make_plan(m, candidates, context=4096)
    assert plan.fits, plan.reasons
    n_layers = plan.n_layers
    assert {"cpu": plan.n_gpu_layers == 0, "gpu": plan.n_gpu_layers == n_layers + 1,
            "partial": 0 < plan.n_gpu_layers <= n_layers}[placement]
    most = plan.max_context
    trained = candidates[0].shape.n_ctx_train
    assert MIN_CONTEXT < most < trained and most % KV_PADDING == 0, most
    # At the figure the same file fits the same way; 256 tokens more and it no longer does.
    assert same_placement(make_plan(m, candidates, context=most), plan)
    assert not same_placement(make_plan(m, candidates, context=most + KV_PADDING), plan)
    where = {"cpu": "in RAM", "gpu": "fully on the GPU", "partial": f"with {plan.n_gpu_layers} of 80 layers on the GPU"}
    assert f"{plan.quant} fits {where[placement]} up to {most:,} tokens of context." in plan.reasons
    assert plan.to_dict()["max_context"] == most


def test_max_context_stops_at_the_trained_length():
    plan = make_plan(CPU_256, one(REPO_8B, "Q4_K_M"), context=4096)
    assert plan.max_context == LLAMA_8B.n_ctx_train == 131072
    assert any("up to 131,072 tokens of context, the model's trained length" in r for r in plan.reasons)
    trained_8k = gguf_candidates([("m-Q4_K_M.gguf", int(4.1 * GB))], replace(LLAMA_8B, n_ctx_train=8000))
    assert make_plan(CPU_256, trained_8k, context=4096).max_context == 8000  # not a multiple of 256: as trained


def test_auto_takes_the_cap_when_more_fits_and_says_what_would():
    plan = make_plan(CPU_256, one(REPO_8B, "Q4_K_M"), context=None)
    assert plan.fits and plan.context == AUTO_CONTEXT_CAP == 32768
    assert plan.forecast.settings.n_ctx == 32768
    assert plan.reasons[-1] == ("Context: auto — 32,768 tokens (the auto cap; 131,072 would fit, "
                                "raise the cap for more).")
    raised = make_plan(CPU_256, one(REPO_8B, "Q4_K_M"), context=None, auto_context_cap=65536)
    assert raised.context == 65536
    assert make_plan(CPU_256, one(REPO_8B, "Q4_K_M"), context=None, auto_context_cap=1 << 20).context == 131072


@pytest.mark.parametrize(
    ("m", "candidates", "cap"),
    [(CPU_16, one(REPO_8B, "Q4_K_M"), 1 << 20), (FAKE_4090, one(REPO_8B, "F16"), 1 << 20),
     (FAKE_4090, one(REPO_8B, "F16"), 40960), (RTX_3060, REPO_8B, AUTO_CONTEXT_CAP), (CPU_16, REPO_8B, 16384)],
)
def test_auto_is_the_least_of_the_largest_that_fits_the_cap_and_the_trained_length(m, candidates, cap):
    plan = make_plan(m, candidates, context=None, auto_context_cap=cap)
    assert plan.fits
    assert plan.context == min(plan.max_context, cap, LLAMA_8B.n_ctx_train)
    assert plan.reasons[-1].startswith(f"Context: auto — {plan.context:,} tokens (")
    # what a fixed context of that size plans is what auto planned
    fixed = make_plan(m, candidates, context=plan.context)
    assert (fixed.files, fixed.n_gpu_layers, fixed.forecast) == (plan.files, plan.n_gpu_layers, plan.forecast)


def test_auto_on_a_3060_takes_everything_q8_0_leaves():
    plan = make_plan(RTX_3060, REPO_8B, context=None)
    assert plan.quant == "Q8_0" and plan.n_gpu_layers == plan.n_layers + 1
    assert MIN_CONTEXT < plan.context == plan.max_context < AUTO_CONTEXT_CAP
    assert f"(the most that fits; files are compared at {AUTO_WALK_CONTEXT:,} tokens" in plan.reasons[-1]


def test_auto_compares_files_at_8k_tokens():
    # F16 of the 8B fits on this GPU with a little over 2,048 tokens only: auto takes Q8_0, whole on
    # the GPU with every token that fits beside it (a fixed 4,096 takes Q8_0 too).
    tight = replace(FAKE_4090, gpu_free_bytes=14 * GIB)
    fixed = make_plan(tight, REPO_8B, context=4096)
    auto = make_plan(tight, REPO_8B, context=None)
    assert fixed.quant == auto.quant == "Q8_0"
    assert auto.n_gpu_layers == auto.n_layers + 1
    assert auto.context == AUTO_CONTEXT_CAP < auto.max_context  # 50,688 would fit
    assert any(f"at {AUTO_WALK_CONTEXT:,} tokens of context" in r for r in auto.reasons)


def test_auto_falls_back_to_the_least_context_when_nothing_fits_8k():
    # 5.6 GiB of RAM: no file of the 8B fits with 8,192 tokens, Q2_K does with some 4,000.
    small = Machine(None, 0, 0, None, int(5.6 * GIB))
    plan = make_plan(small, REPO_8B, context=None)
    assert plan.fits and plan.quant == "Q2_K", plan.reasons
    assert MIN_CONTEXT < plan.context == plan.max_context < AUTO_WALK_CONTEXT
    assert f"files are compared at {MIN_CONTEXT:,} tokens" in plan.reasons[-1]


def test_auto_of_a_model_trained_for_less_than_the_least_context_takes_its_length():
    short = gguf_candidates([("m-Q4_K_M.gguf", int(4.1 * GB))], replace(LLAMA_8B, n_ctx_train=1024))
    plan = make_plan(CPU_16, short, context=None)
    assert plan.fits and plan.context == plan.max_context == 1024
    assert "the model's trained length: all of it fits" in plan.reasons[-1]


def test_a_model_too_large_even_at_2048_says_so():
    tiny = machine("NVIDIA GeForce RTX 3060", 12, cc=(8, 6), ram_gib=8)
    plan = make_plan(tiny, REPO_70B, context=None)
    assert not plan.fits and plan.context == MIN_CONTEXT
    assert "Even the smallest file does not fit at 2,048 tokens: choose a smaller model." in plan.reasons
    assert plan.reasons[-1] == "Context: auto needs at least 2,048 tokens; not even that fits."
    nothing = make_plan(machine(None, ram_gib=2), REPO_70B, context=None)
    assert not nothing.fits and nothing.max_context == 0


def test_without_a_trained_length_the_search_still_ends():
    unknown = gguf_candidates([("m-Q4_K_M.gguf", int(4.1 * GB))], replace(LLAMA_8B, n_ctx_train=0))
    plan = make_plan(CPU_16, unknown, context=None)
    assert plan.context == AUTO_CONTEXT_CAP and AUTO_CONTEXT_CAP < plan.max_context < 1 << 20


def test_gqa_matters_more_than_size_for_the_context():
    # The same 8B without grouped-query attention has a KV cache four times as large per token.
    no_gqa = gguf_candidates([("x-Q4_K_M.gguf", int(4.1 * GB))], llama_shape(32, 4096, 14336, 32, 32, 14.0))
    with_gqa = make_plan(CPU_16, one(REPO_8B, "Q4_K_M"), context=4096).max_context
    assert make_plan(CPU_16, no_gqa, context=4096).max_context < with_gqa / 3.5


def test_a_cap_that_is_not_positive_is_an_error():
    with pytest.raises(ValueError, match="auto_context_cap must be a positive number of tokens, not 0"):
        make_plan(CPU_16, REPO_8B, context=None, auto_context_cap=0)


def test_a_partial_offload_under_auto_keeps_the_trees_layers():
    plan = make_plan(FAKE_4090, one(REPO_70B, "Q4_K_M"), context=None)
    assert plan.fits and 0 < plan.n_gpu_layers <= plan.n_layers
    assert plan.context == plan.max_context >= MIN_CONTEXT
    assert LLAMA_70B.n_ctx_train > plan.context

"""Loads follow the decision tree: the planner, and the plan shown in the window."""

from __future__ import annotations

from pathlib import Path

from app.load_planner import LoadPlanner
from models.hardware import profile_for


def test_on_this_machine_the_starter_model_loads_on_the_cpu_with_flash_attention(starter_model: Path):
    planned = LoadPlanner().plan_load(str(starter_model), n_ctx=2048)
    assert planned.plan is not None and planned.plan.fits
    request = planned.request
    assert (request.n_gpu_layers, request.n_ctx, request.kv_type, request.flash_attn) == (0, 2048, "f16", True)


def test_on_an_rtx_4090_every_layer_and_the_output_go_to_the_gpu(starter_model: Path):
    planner = LoadPlanner(profile_for("RTX 4090", ram_gib=64))
    planned = planner.plan_load(str(starter_model), n_ctx=8192, kv_type="q8_0")
    assert planned.request.n_gpu_layers == 31 and planned.request.kv_type == "q8_0"
    assert "RTX 4090" in planned.plan.reasons[0]


def test_an_unreadable_file_gets_no_plan_and_the_engine_reports_it(truncated_model: Path):
    planned = LoadPlanner().plan_load(str(truncated_model), n_ctx=2048)
    assert planned.plan is None
    assert planned.request.path == str(truncated_model)


def test_the_window_shows_the_plan_and_why(qtbot, window):
    label = window.plan_label
    assert label.text().startswith("CPU · KV f16 · forecast ")
    assert "No NVIDIA GPU" in label.toolTip()
    box = window.show_plan()
    assert "Why:" in box.informativeText() and "all layers on the CPU" in box.informativeText()
    box.close()

"""Loads follow the decision tree: the planner, and the plan shown in the window."""

from __future__ import annotations

from pathlib import Path

from app.services.load_settings import LoadSettings
from app.services.paths import AppPaths
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for

# The machines these tests plan for are handed in, never this one's: a GPU here must not change them.
NO_GPU = profile_for(ram_gib=16)


def test_without_a_gpu_the_starter_model_loads_on_the_cpu_with_flash_attention(starter_model: Path):
    planned = LoadPlanner(NO_GPU).plan_load(str(starter_model), LoadSettings(2048))
    assert planned.plan is not None and planned.plan.fits
    request = planned.request
    assert (request.n_gpu_layers, request.n_ctx, request.kv_type, request.flash_attn) == (0, 2048, "f16", True)


def test_on_an_rtx_4090_every_layer_and_the_output_go_to_the_gpu(starter_model: Path):
    planner = LoadPlanner(profile_for("RTX 4090", ram_gib=64))
    planned = planner.plan_load(str(starter_model), LoadSettings(8192, "q8_0"))
    assert planned.request.n_gpu_layers == 31 and planned.request.kv_type == "q8_0"
    assert "RTX 4090" in planned.plan.reasons[0]


def test_an_unreadable_file_gets_no_plan_and_the_engine_reports_it(truncated_model: Path):
    planned = LoadPlanner(NO_GPU).plan_load(str(truncated_model), LoadSettings(2048))
    assert planned.plan is None
    assert planned.request.path == str(truncated_model)


def test_a_quantized_kv_cache_turns_flash_attention_on_and_says_so(starter_model: Path):
    planned = LoadPlanner(NO_GPU).plan_load(str(starter_model), LoadSettings(2048, "q4_0", flash_attn="off"))
    assert planned.request.flash_attn is True and planned.request.kv_type == "q4_0"
    assert "needs flash attention" in planned.plan.reasons[-1]
    off = LoadPlanner(NO_GPU).plan_load(str(starter_model), LoadSettings(8192, "f16", flash_attn="off"))
    assert off.request.flash_attn is False
    # Without flash attention llama.cpp materializes the attention scores: a bigger compute buffer.
    on = LoadPlanner(NO_GPU).plan_load(str(starter_model), LoadSettings(8192, "f16", flash_attn="on"))
    assert off.plan.forecast.total("compute_bytes") > on.plan.forecast.total("compute_bytes")


def test_kv_settings_of_a_chat_reload_the_model_as_planned(qtbot, window):
    panel = window.settings_panel
    panel.kv_type.setCurrentText("q8_0")
    with qtbot.waitSignal(window.controller.loaded, timeout=60_000):
        window.submit("Name a colour.")  # commits the settings, then loads before replying
    assert window.session.plan.kv_type == "q8_0"
    assert "KV q8_0" in window.plan_label.text()
    stored = window.session.store.get_conversation(window.session.current.id).settings
    assert (stored.load.kv_type, stored.load.flash_attn) == ("q8_0", "auto")
    qtbot.waitUntil(lambda: not window.session.busy, timeout=60_000)


def test_without_a_gpu_the_window_shows_the_plan_and_why(qtbot, make_window):
    window = make_window(start=False)
    window.session.model.planner = LoadPlanner(NO_GPU, prefix_cache_dir=AppPaths.default().prefix_cache)
    with qtbot.waitSignal(window.controller.loaded, timeout=60_000):
        window.session.start()
    label = window.plan_label
    assert label.text().startswith("CPU · KV f16 · forecast ")
    assert "No NVIDIA GPU" in label.toolTip()
    page = window.show_plan()  # the side panel's Model plan tab
    assert page.isVisible() and "Why:" in page.text() and "all layers on the CPU" in page.text()

"""The plan of a load with a GGUF draft model says what the draft adds, and where."""

from __future__ import annotations

from pathlib import Path

from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.plan.load_options import SpeculativeOptions
from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama


def test_a_draft_model_is_in_the_plans_reasons(starter_model: Path, tmp_path: Path):
    draft = write_tiny_llama(tmp_path / "tiny-draft.gguf", TinySpec(n_layers=2), borrow_tokenizer(starter_model))
    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)
    with_draft = LoadSettings(n_ctx=2048, speculation=SpeculativeOptions("draft", str(draft)))
    planned = planner.plan_load(str(starter_model), with_draft)
    (line,) = [r for r in planned.plan.reasons if r.startswith("Draft model")]
    assert "tiny-draft.gguf" in line and "more on the CPU" in line and "KV cache at 2,048 tokens" in line
    assert planned.request.speculation.draft_path == str(draft)
    alone = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048))
    assert not [r for r in alone.plan.reasons if r.startswith("Draft model")]
    broken = planner.plan_load(str(starter_model), LoadSettings(
        n_ctx=2048, speculation=SpeculativeOptions("draft", str(tmp_path / "missing.gguf"))))
    assert any(r.startswith("Draft model missing.gguf: not planned") for r in broken.plan.reasons)


def _gpu_planner(tmp_path: Path, vram_gib: float) -> LoadPlanner:
    return LoadPlanner(profile_for("RTX 4090", vram_gib=vram_gib, ram_gib=32), status_dir=tmp_path)


def test_on_a_gpu_the_model_leaves_room_for_the_draft_beside_it(starter_model: Path, tmp_path: Path):
    draft = write_tiny_llama(tmp_path / "tiny-draft.gguf", TinySpec(n_layers=2), borrow_tokenizer(starter_model))
    settings = LoadSettings(n_ctx=4096, speculation=SpeculativeOptions("draft", str(draft)))
    planned = _gpu_planner(tmp_path, 24).plan_load(str(starter_model), settings)
    plan = planned.plan
    assert plan.n_gpu_layers > plan.n_layers and planned.request.draft_on_gpu is True
    (line,) = [r for r in plan.reasons if r.startswith("Draft model")]
    assert "more on the GPU" in line and "leaves room for it" in line


def test_a_gpu_without_room_for_both_puts_the_draft_on_the_cpu(starter_model: Path, tmp_path: Path):
    tokenizer = borrow_tokenizer(starter_model)
    draft = write_tiny_llama(tmp_path / "big-draft.gguf", TinySpec(n_layers=2, n_embd=512, n_heads=8), tokenizer)
    settings = LoadSettings(n_ctx=4096, speculation=SpeculativeOptions("draft", str(draft)))
    alone = LoadSettings(n_ctx=4096)
    # A card the model alone fits on whole, with less to spare than the draft needs.
    for vram_gib in (x / 100 for x in range(20, 200, 2)):
        planner = _gpu_planner(tmp_path, vram_gib)
        model_only = planner.plan_load(str(starter_model), alone).plan
        if model_only.n_gpu_layers > model_only.n_layers:
            break
    planned = planner.plan_load(str(starter_model), settings)
    assert planned.request.draft_on_gpu is False and planned.plan.n_gpu_layers > planned.plan.n_layers
    (line,) = [r for r in planned.plan.reasons if r.startswith("Draft model")]
    assert "more on the CPU" in line

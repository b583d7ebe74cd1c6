"""The plan of a load with a GGUF draft model says what the draft adds, and where."""

from __future__ import annotations

from pathlib import Path

from app.services.load_planner import LoadPlanner, LoadSettings
from models.hardware import profile_for
from models.load_options import SpeculativeOptions
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

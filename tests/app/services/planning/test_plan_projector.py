"""The plan of a load with a projector fits the model and the projector together, and says where it goes."""

from __future__ import annotations

from pathlib import Path

from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.plan_text import format_plan
from models.formats.projector_header import read_projector_info
from models.hardware.profile import profile_for
from models.plan.projector_forecast import projector_forecast
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


def projector(tmp_path: Path) -> Path:
    # Gemma 3's encoder shape at 448 px: 33 MiB of weights, about 21 MiB of compute
    return write_tiny_projector(tmp_path / "mmproj-gemma3.gguf", TinyProjectorSpec(
        projector_type="gemma3", image_size=448, patch_size=14, n_embd=768, n_ff=3072, n_heads=12, merge=4))


def test_on_the_cpu_the_projector_is_in_the_forecast_the_reasons_and_the_request(starter_model: Path, tmp_path: Path):
    mmproj = projector(tmp_path)
    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)
    alone = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048))
    planned = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048, mmproj=str(mmproj)))
    assert planned.request.mmproj == str(mmproj)
    own = projector_forecast(read_projector_info(mmproj))
    cpu = planned.plan.forecast.devices["cpu"]
    assert cpu.projector_bytes == own.total_bytes > 50 * 2**20
    assert cpu.total_bytes == alone.plan.forecast.devices["cpu"].total_bytes + own.total_bytes
    (line,) = [r for r in planned.plan.reasons if r.startswith("Projector")]
    assert "mmproj-gemma3.gguf (images)" in line and "on the CPU" in line and "planned beside the model" in line
    assert "projector" in format_plan(planned.plan)  # `tailor plan` prints its part


def test_on_a_gpu_the_projector_goes_where_the_layers_are_and_takes_its_room(starter_model: Path, tmp_path: Path):
    mmproj = projector(tmp_path)
    planner = LoadPlanner(profile_for("RTX 4090", vram_gib=24, ram_gib=32), status_dir=tmp_path)
    planned = planner.plan_load(str(starter_model), LoadSettings(n_ctx=4096, mmproj=str(mmproj)))
    assert planned.plan.n_gpu_layers > planned.plan.n_layers
    assert planned.plan.forecast.devices["cuda:0"].projector_bytes > 0
    assert planned.plan.forecast.devices.get("cpu") is None or planned.plan.forecast.devices["cpu"].projector_bytes == 0
    (line,) = [r for r in planned.plan.reasons if r.startswith("Projector")]
    assert "on the GPU" in line


def test_a_projector_that_cannot_be_read_is_named_and_the_model_still_planned(starter_model: Path, tmp_path: Path):
    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)
    planned = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048, mmproj=str(starter_model)))
    (line,) = [r for r in planned.plan.reasons if r.startswith("Projector")]
    assert "not planned" in line and "not a vision projector" in line
    assert planned.plan.fits

"""Several GPUs: the plan splits a model over every card llama.cpp can use, as llama.cpp's layer split does.

The machines come from NVML's answers (tests/fixtures/fake_nvml.py) and llama.cpp's device list as
its CUDA build reports it; the 70B model is Llama 3.1 70B's real header laid out as llama.cpp's
quantizer lays out Q4_K_M (42.5 GB), so the per-card figures are those of the real file.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.hardware.backend_devices import BackendDevice, LlamaDevices
from models.hardware.gpu_cards import GpuCard, cuda_cards
from models.hardware.profile import HardwareProfile, detect_hardware
from models.plan.budget import card_budget
from models.plan.candidates import gguf_candidates
from models.plan.decision_tree import make_plan
from models.plan.forecast import ForecastSettings, compute_bytes, forecast, kv_layer_bytes, shape_from_gguf
from models.plan.layer_split import PIPELINE_COPIES, layer_devices, split_points
from models.plan.machine import Machine
from models.units import GIB
from tests.fixtures.fake_nvml import MixedGpuNvml, OneGpuNvml, TwoGpuNvml
from tests.fixtures.real_shapes import LLAMA_3_1_70B, q4_k_m_header

GB = 10**9
HEADER_70B = q4_k_m_header(LLAMA_3_1_70B)
SHAPE_70B = shape_from_gguf(HEADER_70B)
Q4_K_M_70B = gguf_candidates([("Llama-3.1-70B-Instruct-Q4_K_M.gguf", HEADER_70B.file_size)], SHAPE_70B)
# bartowski's Q2_K of the same model: 26.4 GB.
REPO_70B = gguf_candidates([("Llama-3.1-70B-Instruct-Q4_K_M.gguf", HEADER_70B.file_size),
                            ("Llama-3.1-70B-Instruct-Q2_K.gguf", int(26.4 * GB))], SHAPE_70B)
CPU = BackendDevice("CPU", "AMD Ryzen 9 7950X", "cpu", 60 * GIB, 64 * GIB)


def cuda_build(*cards: tuple[str, float]) -> LlamaDevices:
    """llama.cpp's CUDA build as it lists these cards (name, free GiB as its own probe saw it)."""
    devices = tuple(BackendDevice(f"CUDA{i}", name, "gpu", int(free * GIB), 24 * GIB)
                    for i, (name, free) in enumerate(cards))
    return LlamaDevices(gpu_offload=True, devices=(*devices, CPU), backends=("CUDA", "CPU"))


def machine_of(nvml, llama: LlamaDevices | None = None) -> Machine:
    profile: HardwareProfile = replace(detect_hardware(nvml), ram_available_bytes=64 * GIB, llama=llama)
    return Machine.from_profile(profile)


def gpu_parts(plan) -> dict[str, int]:
    return {name: d.total_bytes for name, d in plan.forecast.devices.items() if name != "cpu"}


def test_70b_q4_k_m_is_real_sized():
    assert 42.4 * GB < HEADER_70B.file_size < 42.6 * GB
    assert SHAPE_70B.n_layers == 80 and SHAPE_70B.n_embd == 8192 and SHAPE_70B.n_kv_heads == (8,) * 80


def test_two_24_gb_cards_hold_a_70b_q4_k_m_whole_split_50_50():
    m = machine_of(TwoGpuNvml(), cuda_build(("NVIDIA GeForce RTX 4090", 23.1), ("NVIDIA GeForce RTX 4090", 23.1)))
    # NVML's free memory, not what the probe's own CUDA context left.
    assert [g.free_bytes for g in m.gpus] == [int(23.5 * GIB)] * 2
    plan = make_plan(m, Q4_K_M_70B, context=4096)
    assert plan.fits and plan.n_gpu_layers == 81 and plan.tensor_split == (0.5, 0.5)
    assert plan.to_dict()["tensor_split"] == [0.5, 0.5]
    parts = gpu_parts(plan)
    assert set(parts) == {"cuda:0", "cuda:1"}
    for name, total in parts.items():
        assert total <= card_budget(int(23.5 * GIB)) < int(23.5 * GIB), name
    # 81 slots (80 layers and the output) by the cumulative shares 0.5, 1.0: slot k on card 0 while k/81 < 0.5.
    cuda0, cuda1 = plan.forecast.devices["cuda:0"], plan.forecast.devices["cuda:1"]
    assert cuda0.weights_bytes == sum(SHAPE_70B.layer_weight_bytes[:41])
    assert cuda1.weights_bytes == sum(SHAPE_70B.layer_weight_bytes[41:]) + SHAPE_70B.output_weight_bytes
    assert cuda0.kv_cache_bytes == 41 * 4096 * 1024 * 2 * 2  # 41 layers x 4096 cells x (8 x 128) x K+V x f16
    assert plan.forecast.devices["cpu"].weights_bytes == SHAPE_70B.input_weight_bytes
    first = plan.reasons[0]
    assert first.startswith("GPUs: 2x NVIDIA GeForce RTX 4090 (compute capability 8.9), 47.0 GiB free in all")
    assert "layers split 50/50" in first
    assert any("entirely on the 2 GPUs" in r and "cuda:1: layers 41-79 and the output layer" in r
               for r in plan.reasons)


def test_one_of_those_cards_alone_takes_only_part_of_it():
    one = make_plan(machine_of(OneGpuNvml()), Q4_K_M_70B, context=4096)
    assert one.fits and 0 < one.n_gpu_layers < 50 and one.tensor_split == ()
    assert set(one.forecast.devices) == {"cpu", "cuda:0"}


def test_24_and_12_gb_cards_split_by_free_memory_and_offload_partly():
    m = machine_of(MixedGpuNvml())
    assert [g.name for g in m.gpus] == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3060"]
    plan = make_plan(m, Q4_K_M_70B, context=4096)
    assert plan.fits and 40 <= plan.n_gpu_layers <= 80
    assert plan.tensor_split == (round(23.5 / 35, 4), round(11.5 / 35, 4))
    parts = gpu_parts(plan)
    assert parts["cuda:0"] <= card_budget(int(23.5 * GIB)) and parts["cuda:1"] <= card_budget(int(11.5 * GIB))
    # One layer more does not fit on some card: the plan took the most.
    more = forecast(SHAPE_70B, replace(plan.forecast.settings, n_gpu_layers=plan.n_gpu_layers + 1))
    assert any(more.devices[n].total_bytes > card_budget(int(f * GIB)) for n, f in (("cuda:0", 23.5), ("cuda:1", 11.5)))
    placed = layer_devices(80, plan.n_gpu_layers, plan.tensor_split)
    on_0, on_1 = placed.count(0), placed.count(1)
    assert on_0 + on_1 == plan.n_gpu_layers and placed[80] == 1  # the output layer on the last card
    assert abs(on_0 / plan.n_gpu_layers - 23.5 / 35) <= 1 / plan.n_gpu_layers  # the split is proportional
    assert placed[:80 - plan.n_gpu_layers + 1] == (None,) * (80 - plan.n_gpu_layers + 1)  # the first layers: CPU
    assert "layers split 67/33" in plan.reasons[0] and "(23.5 + 11.5 GiB)" in plan.reasons[0]
    assert any("layers on the 2 GPUs (cuda:0: layers" in r for r in plan.reasons)


def test_a_smaller_level_fits_the_24_and_12_gb_cards_whole():
    plan = make_plan(machine_of(MixedGpuNvml()), REPO_70B, context=4096)
    assert plan.quant == "Q2_K" and plan.n_gpu_layers == 81 and plan.fits
    parts = gpu_parts(plan)
    assert parts["cuda:0"] <= card_budget(int(23.5 * GIB)) and parts["cuda:1"] <= card_budget(int(11.5 * GIB))
    assert any("Q4_K_M" in r and "does not fit entirely on the 2 GPUs" in r for r in plan.reasons)


def test_cuda_numbers_the_cards_fastest_first_and_each_keeps_its_own_memory():
    # NVML (PCI order) has the 4090 first; a CUDA that numbers the 3060 first still gets each card's memory.
    profile = detect_hardware(MixedGpuNvml())
    llama = cuda_build(("NVIDIA GeForce RTX 3060", 11.0), ("NVIDIA GeForce RTX 4090", 23.0))
    cards = cuda_cards(llama.devices, profile.gpus, visible="")
    assert cards == (GpuCard("NVIDIA GeForce RTX 3060", int(11.5 * GIB), 12 * GIB, (8, 6)),
                     GpuCard("NVIDIA GeForce RTX 4090", int(23.5 * GIB), 24 * GIB, (8, 9)))
    # CUDA_VISIBLE_DEVICES=1 leaves llama.cpp the 3060 alone: the plan has that card and its memory.
    only = cuda_cards(cuda_build(("NVIDIA GeForce RTX 3060", 11.0)).devices, profile.gpus, visible="1")
    assert only == (GpuCard("NVIDIA GeForce RTX 3060", int(11.5 * GIB), 12 * GIB, (8, 6)),)
    by_uuid = cuda_cards(cuda_build(("NVIDIA GeForce RTX 3060", 11.0)).devices, profile.gpus, visible="GPU-3060")
    assert by_uuid == only


def test_one_card_plans_exactly_as_before():
    m = machine_of(OneGpuNvml())
    assert m == Machine("NVIDIA GeForce RTX 4090", 22 * GIB, 24 * GIB, (8, 9), 64 * GIB, cpu_repack=m.cpu_repack)
    assert len(m.gpus) == 1 and m.gpu_label == "NVIDIA GeForce RTX 4090" and m.gpus_free_bytes == 22 * GIB
    plan = make_plan(m, Q4_K_M_70B, context=4096)
    assert plan.tensor_split == () and plan.forecast.settings.tensor_split == ()
    assert plan.reasons[0] == ("GPU: NVIDIA GeForce RTX 4090 (compute capability 8.9), 22.0 GiB free of 24.0 GiB; "
                               "planning with 20.3 GiB after a 0.6 GiB reserve and a 5% margin.")
    # Replacing a single-GPU field replaces the card too (tests and callers tighten a machine so).
    tight = replace(m, gpu_free_bytes=10 * GIB)
    assert tight.gpus == (GpuCard("NVIDIA GeForce RTX 4090", 10 * GIB, 24 * GIB, (8, 9)),)


def test_the_pytorch_engine_plans_on_the_first_card_only():
    m = machine_of(TwoGpuNvml())
    assert (m.gpu_name, m.gpu_free_bytes) == ("NVIDIA GeForce RTX 4090", int(23.5 * GIB))
    assert m.gpus_free_bytes == 47 * GIB and m.gpu_label == "2x NVIDIA GeForce RTX 4090"


def test_a_cpu_only_build_names_all_the_cards_it_leaves_unused():
    llama = LlamaDevices(gpu_offload=False, devices=(CPU,), backends=("CPU",))
    plan = make_plan(machine_of(TwoGpuNvml(), llama), Q4_K_M_70B, context=4096)
    assert plan.n_gpu_layers == 0 and plan.tensor_split == ()
    assert plan.reasons[0] == "llama.cpp here was built without CUDA: run `make gpu` to use your 2x NVIDIA GeForce RTX 4090."


def test_layers_follow_llama_cpps_float32_split_points():
    # Three equal shares: the points are float32(1/3), float32(2/3), 1; slot 27 of 81 is exactly the
    # first point, and llama.cpp's upper_bound sends it to the next card: 27 slots each.
    assert split_points((1, 1, 1))[2] == 1.0
    placed = layer_devices(80, 81, (1, 1, 1))
    assert (placed.count(0), placed.count(1), placed.count(2)) == (27, 27, 27)
    # Output layer first: 10 GPU layers on one card are the output and layers 71-79.
    assert layer_devices(80, 10) == (None,) * 71 + (0,) * 10
    assert layer_devices(80, 1) == (None,) * 80 + (0,)
    assert layer_devices(80, -1, (3, 1)).count(None) == 0  # negative: everything, as in llama.cpp
    # A card with no share gets nothing.
    assert 1 not in layer_devices(80, 81, (1, 0, 1))


@pytest.mark.parametrize(("split", "words"), [((1, -1), "not negative, not -1"), ((0, 0), "all zero"),
                                              ((1, float("nan")), "finite")])
def test_a_bad_tensor_split_is_a_clear_error(split, words):
    with pytest.raises(ValueError, match=words):
        split_points(split)


def test_two_cards_holding_every_layer_keep_the_scheduler_s_pipeline_copies():
    s = ForecastSettings(n_ctx=4096, n_gpu_layers=81, tensor_split=(0.5, 0.5))
    f = forecast(SHAPE_70B, s)
    # cuda:0 runs layers 0-40 without the logits; pipeline parallelism keeps 4 copies of its inputs:
    # a ubatch of hidden state (8192 x 512 f32) and the f16 attention mask (4096 cells x 512).
    copies = PIPELINE_COPIES * (8192 * 512 * 4 + 4096 * 512 * 2)
    assert f.devices["cuda:0"].compute_bytes == compute_bytes(SHAPE_70B, s, with_logits=False) + copies
    assert f.devices["cuda:0"].kv_cache_bytes == sum(kv_layer_bytes(SHAPE_70B, i, s) for i in range(41))
    partial = forecast(SHAPE_70B, replace(s, n_gpu_layers=60))  # not every layer: no pipeline
    assert partial.devices["cuda:0"].compute_bytes == compute_bytes(SHAPE_70B, s, with_logits=False)

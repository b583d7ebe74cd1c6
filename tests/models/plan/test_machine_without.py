"""Machine.without: the machine left for one more model beside others planned on it (a server's pool)."""

from __future__ import annotations

from models.hardware.gpu_cards import GpuCard
from models.plan.candidates import gguf_candidates
from models.plan.decision_tree import make_plan
from models.plan.machine import Machine
from models.units import GIB
from tests.models.plan.test_decision_tree import LLAMA_8B

TWO_GPUS = Machine.with_gpus((GpuCard("RTX 4090", 20 * GIB, 24 * GIB, (8, 9)), GpuCard("RTX 3090", 22 * GIB, 24 * GIB,
                                                                                      (8, 6))), 48 * GIB)


def test_each_device_loses_what_is_held_there_and_nothing_goes_below_zero():
    left = TWO_GPUS.without({"cuda:0": 5 * GIB, "cuda:1": 30 * GIB, "cpu": 8 * GIB})
    assert [c.free_bytes for c in left.gpus] == [15 * GIB, 0]
    assert left.gpu_free_bytes == 15 * GIB and left.ram_available_bytes == 40 * GIB
    assert left.gpu_total_bytes == TWO_GPUS.gpu_total_bytes  # the cards are the same cards
    assert TWO_GPUS.without({}) is TWO_GPUS
    cpu = Machine(None, 0, 0, None, 16 * GIB).without({"cpu": 4 * GIB, "cuda:0": GIB})
    assert cpu.ram_available_bytes == 12 * GIB and not cpu.has_gpu


def test_a_model_planned_beside_another_gets_what_the_other_left():
    (q4,) = gguf_candidates([("Llama-3.1-8B-Instruct-Q4_K_M.gguf", int(4.9 * 10**9))], LLAMA_8B)
    gpu = Machine("RTX 4060", 7 * GIB, 8 * GIB, (8, 9), 32 * GIB)
    alone = make_plan(gpu, [q4], context=4096)
    assert alone.n_gpu_layers > alone.n_layers  # all of it on the GPU
    held = alone.forecast.devices["cuda:0"].total_bytes
    beside = make_plan(gpu.without({"cuda:0": held}), [q4], context=4096)
    assert beside.n_gpu_layers < alone.n_gpu_layers  # a second copy does not fit on the GPU beside the first

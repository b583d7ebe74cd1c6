"""The plan follows what llama.cpp can really use: a CPU-only build, a hidden GPU, a GPU only ggml sees."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.hardware.backend_devices import BackendDevice, LlamaDevices, unknown_devices
from models.hardware.profile import GIB, profile_for
from models.plan.decision_tree import make_plan
from models.plan.machine import Machine
from tests.models.plan.test_decision_tree import REPO_8B

CPU_DEVICE = BackendDevice("CPU", "AMD EPYC", "cpu", 60 * GIB, 64 * GIB)
CUDA_DEVICE = BackendDevice("CUDA0", "NVIDIA GeForce RTX 4090", "gpu", 23 * GIB, 24 * GIB)
CPU_BUILD = LlamaDevices(gpu_offload=False, devices=(CPU_DEVICE,), backends=("CPU",))
CUDA_BUILD = LlamaDevices(gpu_offload=True, devices=(CUDA_DEVICE, CPU_DEVICE), backends=("CUDA", "CPU"))
# A CUDA build that found no device: CUDA_VISIBLE_DEVICES="" or a driver too old for it.
CUDA_NO_DEVICE = LlamaDevices(gpu_offload=False, devices=(CPU_DEVICE,), backends=("CUDA", "CPU"))
VULKAN_BUILD = LlamaDevices(
    gpu_offload=True,
    devices=(BackendDevice("Vulkan0", "AMD Radeon RX 7900 XTX", "gpu", 20 * GIB, 24 * GIB), CPU_DEVICE),
    backends=("Vulkan", "CPU"),
)
RTX_4090 = profile_for("RTX 4090", ram_gib=64)
NO_GPU = profile_for(ram_gib=64)


def test_a_cpu_only_llama_cpp_gives_a_cpu_plan_whose_first_reason_says_what_to_run():
    machine = Machine.from_profile(replace(RTX_4090, llama=CPU_BUILD))
    plan = make_plan(machine, REPO_8B, context=4096)
    assert plan.n_gpu_layers == 0 and plan.fits and plan.quant == "Q4_K_M"
    assert plan.reasons[0] == "llama.cpp here was built without CUDA: run `make gpu` to use your RTX 4090."
    assert plan.gpu_unused_reason == plan.reasons[0]
    assert set(plan.forecast.devices) == {"cpu"}


def test_a_cuda_build_offloads_as_before():
    with_cuda = make_plan(Machine.from_profile(replace(RTX_4090, llama=CUDA_BUILD)), REPO_8B)
    unasked = make_plan(Machine.from_profile(RTX_4090), REPO_8B)
    assert with_cuda == unasked
    assert with_cuda.n_gpu_layers == with_cuda.n_layers + 1 and with_cuda.gpu_unused_reason is None


def test_a_hidden_gpu_says_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    plan = make_plan(Machine.from_profile(replace(RTX_4090, llama=CUDA_NO_DEVICE)), REPO_8B)
    assert plan.n_gpu_layers == 0 and "CUDA_VISIBLE_DEVICES is empty" in plan.reasons[0]


def test_a_cuda_build_that_cannot_use_the_gpu_names_the_driver(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plan = make_plan(Machine.from_profile(replace(RTX_4090, llama=CUDA_NO_DEVICE)), REPO_8B)
    assert plan.n_gpu_layers == 0
    assert "cannot use your RTX 4090" in plan.reasons[0] and "driver" in plan.reasons[0]


def test_a_gpu_only_ggml_sees_is_planned_with_the_memory_ggml_reports():
    machine = Machine.from_profile(replace(NO_GPU, llama=VULKAN_BUILD))
    assert machine.gpu_name == "AMD Radeon RX 7900 XTX" and machine.gpu_free_bytes == 20 * GIB
    plan = make_plan(machine, REPO_8B)
    assert plan.n_gpu_layers == plan.n_layers + 1 and plan.gpu_unused_reason is None
    assert "Vulkan0" in plan.reasons[0]


def test_no_gpu_anywhere_is_the_usual_cpu_plan():
    asked = make_plan(Machine.from_profile(replace(NO_GPU, llama=CPU_BUILD)), REPO_8B)
    assert asked == make_plan(Machine.from_profile(NO_GPU), REPO_8B)
    assert asked.reasons[0].startswith("No NVIDIA GPU")


def test_a_probe_that_failed_plans_with_nvml_and_says_so():
    plan = make_plan(Machine.from_profile(replace(RTX_4090, llama=unknown_devices("the probe hung"))), REPO_8B)
    assert plan.n_gpu_layers > 0 and plan.reasons[0] == "the probe hung: planning with the GPU NVML reports."


def test_a_gpu_too_small_for_one_layer_gives_a_cpu_plan():
    tiny = Machine.from_profile(profile_for("RTX 3060", vram_gib=0.25, ram_gib=64))
    plan = make_plan(tiny, REPO_8B)
    assert plan.fits and plan.n_gpu_layers == 0 and set(plan.forecast.devices) == {"cpu"}
    assert any("Not even one layer fits" in r for r in plan.reasons)


def test_the_device_list_survives_json():
    profile = replace(RTX_4090, llama=VULKAN_BUILD)
    assert type(profile).from_dict(profile.to_dict()) == profile


def test_a_cuda_build_gives_ggmls_own_reason_for_finding_no_gpu():
    problem = "its CUDA backend could not be loaded (libcuda.so.1: cannot open shared object file; is the NVIDIA driver installed?)"
    # A build with dynamically loaded backends whose CUDA backend did not load lists only the CPU.
    llama = LlamaDevices(gpu_offload=False, devices=(CPU_DEVICE,), backends=("CPU",), cuda_problem=problem)
    plan = make_plan(Machine.from_profile(replace(RTX_4090, llama=llama)), REPO_8B)
    assert plan.n_gpu_layers == 0 and plan.reasons[0].startswith(f"llama.cpp has CUDA but {problem}")
    assert "make gpu" not in plan.reasons[0]

"""Hardware profile: real detection here, a faithful fake pynvml for GPUs, the catalog, real NVML on a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import psutil
import pytest

from models.hardware.gpu_catalog import CATALOG, find_gpu
from models.hardware.profile import (
    GIB,
    GpuInfo,
    HardwareProfile,
    Pynvml,
    cpu_name,
    detect_hardware,
    parse_compute_capability,
    profile_for,
)
from tests.fixtures.fake_pynvml import RTX_3060, RTX_4090, FakeGpu, FakeHandle, FakePynvml

pynvml = pytest.importorskip("pynvml")  # the fake raises pynvml's own error classes
MIB = 1024**2


def _nvidia_smi(*query: str) -> list[list[str]] | None:
    """Rows of `nvidia-smi --query-gpu=...`, or None where there is no working NVIDIA GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(query)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.strip()]
    return rows or None


needs_gpu = pytest.mark.skipif(_nvidia_smi("name") is None, reason="no NVIDIA GPU (nvidia-smi finds none)")


def _detect(fake: FakePynvml) -> HardwareProfile:
    profile = detect_hardware(Pynvml(fake))
    assert fake.refcount == 0, "every successful nvmlInit is paired with nvmlShutdown"
    return profile


# --- this machine ---


def test_real_detection_gives_a_plausible_profile() -> None:
    profile = detect_hardware()
    ram = psutil.virtual_memory()
    assert profile.ram_total_bytes == ram.total
    assert 0 < profile.ram_available_bytes <= profile.ram_total_bytes
    assert profile.cpu_logical_cores == psutil.cpu_count(logical=True)
    assert 1 <= profile.cpu_physical_cores <= profile.cpu_logical_cores
    assert profile.cpu_name and profile.cpu_name == cpu_name()
    if profile.has_gpu:
        assert profile.source.startswith("nvml")
    else:
        assert profile.source.startswith("none: ") and len(profile.source) > len("none: ")
        assert profile.best_gpu is None and profile.total_vram == 0


@pytest.mark.skipif(_nvidia_smi("name") is not None, reason="this machine has an NVIDIA GPU")
def test_real_detection_without_gpu_says_why() -> None:
    profile = detect_hardware()
    assert profile.gpus == ()
    assert profile.source.startswith("none: ")
    assert "NVIDIA" in profile.source or "NVML" in profile.source or "pynvml" in profile.source


def test_missing_pynvml_package_gives_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    profile = detect_hardware()
    assert profile.gpus == ()
    assert profile.source == "none: the nvidia-ml-py package (pynvml) is not installed"
    assert profile.ram_total_bytes > 0


def test_cpu_name_reads_proc_cpuinfo_and_falls_back(tmp_path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen 9  7950X 16-Core\n"
    )
    assert cpu_name(cpuinfo) == "AMD Ryzen 9 7950X 16-Core"
    assert cpu_name(tmp_path / "missing")  # platform's answer, never empty


# --- the fake NVML ---


def test_zero_gpus() -> None:
    profile = _detect(FakePynvml([]))
    assert profile.gpus == ()
    assert profile.source == "none: the NVIDIA driver reports no GPU"


def test_one_gpu_every_field() -> None:
    gpu = FakeGpu(**{**vars(RTX_4090), "processes": [(4242, 900 * MIB), (os.getpid(), 300 * MIB)]})
    profile = _detect(FakePynvml([gpu]))
    assert profile.source == "nvml"
    assert profile.gpus == (
        GpuInfo(
            index=0,
            name="NVIDIA GeForce RTX 4090",
            uuid="GPU-4090",
            compute_capability=(8, 9),
            total_bytes=24564 * MIB,
            free_bytes=(24564 - 1200) * MIB,
            used_bytes=1200 * MIB,
            driver_version="550.54.15",
            cuda_version="12.4",
            used_by_others_bytes=900 * MIB,  # this process's own 300 MiB are not "others"
        ),
    )
    assert profile.has_gpu and profile.best_gpu == profile.gpus[0]
    assert profile.total_vram == 24564 * MIB


def test_two_gpus_best_is_the_one_with_most_free_memory() -> None:
    profile = _detect(FakePynvml([RTX_3060, RTX_4090], cuda=12020))
    assert [gpu.index for gpu in profile.gpus] == [0, 1]
    assert [gpu.name for gpu in profile.gpus] == ["NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 4090"]
    assert profile.best_gpu is not None and profile.best_gpu.index == 1
    assert profile.total_vram == (12288 + 24564) * MIB
    assert {gpu.cuda_version for gpu in profile.gpus} == {"12.2"}


def test_bytes_names_from_old_pynvml_become_str() -> None:
    profile = _detect(FakePynvml([RTX_4090], bytes_names=True, driver="470.256.02"))
    gpu = profile.gpus[0]
    assert gpu.name == "NVIDIA GeForce RTX 4090" and isinstance(gpu.name, str)
    assert gpu.uuid == "GPU-4090" and gpu.driver_version == "470.256.02"
    json.dumps(profile.to_dict())


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver is installed"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "the NVIDIA driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "differ in version"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML error 999: Unknown Error"),
    ],
)
def test_init_failure_gives_no_gpu_and_the_reason(code: int, words: str) -> None:
    fake = FakePynvml([RTX_4090], init_error=code)
    profile = _detect(fake)
    assert profile.gpus == ()
    assert profile.source.startswith("none: ") and words in profile.source
    assert fake.calls == ["nvmlInit"]  # nothing else asked, no shutdown without init


def test_gpu_lost_mid_way_keeps_the_others() -> None:
    lost = FakeGpu(**{**vars(RTX_3060), "fails": {"nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_GPU_IS_LOST}})
    profile = _detect(FakePynvml([RTX_4090, lost, RTX_3060]))
    assert [gpu.index for gpu in profile.gpus] == [0, 2]
    assert profile.source == "nvml (GPU 1 skipped: the GPU is lost: it stopped answering the driver)"


def test_gpu_lost_in_an_optional_query_still_drops_that_gpu() -> None:
    lost = FakeGpu(**{**vars(RTX_4090), "fails": {"nvmlDeviceGetUUID": pynvml.NVML_ERROR_GPU_IS_LOST}})
    profile = _detect(FakePynvml([lost, RTX_3060]))
    assert [gpu.name for gpu in profile.gpus] == ["NVIDIA GeForce RTX 3060"]


def test_every_gpu_lost_gives_no_gpu() -> None:
    lost = FakeGpu(
        **{**vars(RTX_4090), "fails": {"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_GPU_IS_LOST}}
    )
    profile = _detect(FakePynvml([lost]))
    assert profile.gpus == ()
    assert profile.source == "none: GPU 0 skipped: the GPU is lost: it stopped answering the driver"


def test_unsupported_queries_leave_fields_unknown() -> None:
    fails = {
        "nvmlDeviceGetCudaComputeCapability": pynvml.NVML_ERROR_NOT_SUPPORTED,
        "nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NOT_SUPPORTED,
        "nvmlDeviceGetUUID": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    }
    profile = _detect(FakePynvml([FakeGpu(**{**vars(RTX_4090), "fails": fails})]))
    gpu = profile.gpus[0]
    assert profile.source == "nvml"
    assert gpu.compute_capability is None and gpu.used_by_others_bytes is None and gpu.uuid == ""
    assert gpu.total_bytes == 24564 * MIB


def test_unavailable_process_memory_is_unknown_not_zero() -> None:
    gpu = FakeGpu(**{**vars(RTX_4090), "processes": [(4242, None)]})  # WDDM: pynvml gives None
    assert _detect(FakePynvml([gpu])).gpus[0].used_by_others_bytes is None


def test_device_count_failure_gives_no_gpu() -> None:
    class CountFails(FakePynvml):
        def nvmlDeviceGetCount(self) -> int:
            self._check("nvmlDeviceGetCount")
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    profile = _detect(CountFails([RTX_4090]))
    assert profile.gpus == () and profile.source == "none: the NVIDIA driver is not loaded"


def test_a_non_nvml_exception_never_escapes() -> None:
    class Broken(FakePynvml):
        def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
            raise RuntimeError("driver returned garbage")

    profile = _detect(Broken([RTX_4090]))
    assert profile.gpus == ()
    assert "RuntimeError: driver returned garbage" in profile.source


# --- serialization ---


def test_to_dict_from_dict_round_trip_through_json() -> None:
    fake = FakePynvml(
        [RTX_4090, FakeGpu(**{**vars(RTX_3060), "fails": {"nvmlDeviceGetCudaComputeCapability": 3}})]
    )
    profile = _detect(fake)
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["gpus"][0]["compute_capability"] == [8, 9]
    assert data["gpus"][1]["compute_capability"] is None
    assert HardwareProfile.from_dict(data) == profile
    empty = detect_hardware(Pynvml(FakePynvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)))
    assert HardwareProfile.from_dict(json.loads(json.dumps(empty.to_dict()))) == empty


# --- the catalog and hypothetical machines ---


@pytest.mark.parametrize(
    ("name", "vram_gib", "cc", "datacenter"),
    [
        ("RTX 3060", 12, (8, 6), False),
        ("RTX 4070", 12, (8, 9), False),
        ("RTX 4090", 24, (8, 9), False),
        ("A10", 24, (8, 6), True),
        ("A100", 80, (8, 0), True),
        ("H100", 80, (9, 0), True),
    ],
)
def test_profile_for_catalog_cards(name: str, vram_gib: int, cc: tuple[int, int], datacenter: bool) -> None:
    profile = profile_for(name, ram_gib=64)
    gpu = profile.best_gpu
    assert gpu is not None and gpu.name == name
    assert gpu.total_bytes == gpu.free_bytes == vram_gib * GIB and gpu.used_bytes == 0
    assert gpu.compute_capability == cc
    assert profile.ram_total_bytes == profile.ram_available_bytes == 64 * GIB
    assert profile.source == "hypothetical"
    card = find_gpu(name)
    assert card is not None and card.is_datacenter is datacenter


def test_profile_for_as_the_plan_command_calls_it() -> None:
    profile = profile_for("RTX 4090", vram_gib=24, cc="8.9")
    assert profile.gpus[0].compute_capability == (8, 9)
    assert profile.ram_total_bytes == psutil.virtual_memory().total  # default: this machine's RAM
    assert profile_for("My Homebrew Card", vram_gib=10, cc=7.5).gpus[0].compute_capability == (7, 5)
    assert profile_for("My Homebrew Card", vram_gib=10).gpus[0].compute_capability is None
    assert profile_for(vram_gib=16).gpus[0].name == "GPU with 16 GiB"
    assert profile_for(ram_gib=32).gpus == ()


def test_profile_for_rejects_what_it_cannot_build() -> None:
    with pytest.raises(ValueError, match="give its memory"):
        profile_for("My Homebrew Card")
    with pytest.raises(ValueError, match="compute capability"):
        profile_for("RTX 4090", cc="ada")
    with pytest.raises(ValueError, match="positive"):
        profile_for("RTX 4090", vram_gib=0)
    with pytest.raises(ValueError, match="positive"):
        profile_for(ram_gib=-1)


@pytest.mark.parametrize(
    ("name", "vram_gib", "expected"),
    [
        ("NVIDIA GeForce RTX 4090", None, "RTX 4090"),
        ("4090", None, "RTX 4090"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", None, "RTX 4070 Ti SUPER"),
        ("NVIDIA GeForce RTX 3060", 12.0, "RTX 3060 12GB"),
        ("NVIDIA GeForce RTX 3060", 8.0, "RTX 3060 8GB"),
        ("NVIDIA A100-SXM4-80GB", None, "A100 80GB"),
        ("NVIDIA A100-PCIE-40GB", None, "A100 40GB"),
        ("NVIDIA A10", None, "A10"),
        ("NVIDIA A10G", None, "A10G"),
        ("NVIDIA H100 80GB HBM3", None, "H100 80GB"),
        ("NVIDIA H200", 140.4, "H200"),
        ("NVIDIA L40S", None, "L40S"),
        ("NVIDIA RTX 6000 Ada Generation", None, "RTX 6000 Ada"),
        ("Tesla V100-SXM2-16GB", None, "V100 16GB"),
    ],
)
def test_find_gpu_matches_nvml_and_short_names(name: str, vram_gib: float | None, expected: str) -> None:
    card = find_gpu(name, vram_gib)
    assert card is not None and card.name == expected


def test_find_gpu_unknown_cards() -> None:
    assert find_gpu("Radeon RX 7900 XTX") is None
    assert find_gpu("") is None


def test_catalog_is_consistent() -> None:
    names = [card.name for card in CATALOG]
    assert len(names) == len(set(names))
    for card in CATALOG:
        assert card.vram_gib > 0 and card.compute_capability >= (6, 0)
        assert find_gpu(card.name, card.vram_gib) == card


def test_parse_compute_capability() -> None:
    assert parse_compute_capability("8.9") == (8, 9)
    assert parse_compute_capability("12.0") == (12, 0)
    assert parse_compute_capability("9") == (9, 0)
    assert parse_compute_capability(8.6) == (8, 6)
    assert parse_compute_capability((9, 0)) == (9, 0)
    with pytest.raises(ValueError):
        parse_compute_capability("8.x")


# --- a real GPU ---


@pytest.mark.gpu
@needs_gpu
def test_real_nvml_matches_nvidia_smi() -> None:
    rows = _nvidia_smi("name", "memory.total")
    assert rows is not None
    profile = detect_hardware()
    assert profile.source == "nvml", profile.source
    assert [gpu.name for gpu in profile.gpus] == [name for name, _ in rows]
    assert [gpu.total_bytes // MIB for gpu in profile.gpus] == [int(mib) for _, mib in rows]
    for gpu in profile.gpus:
        assert gpu.used_bytes + gpu.free_bytes <= gpu.total_bytes
        assert gpu.compute_capability is not None and gpu.compute_capability >= (3, 0)
        assert gpu.uuid.startswith("GPU-") and gpu.driver_version and gpu.cuda_version


@pytest.mark.gpu
@needs_gpu
def test_real_nvml_driver_uuid_and_capability_match_nvidia_smi() -> None:
    rows = _nvidia_smi("uuid", "driver_version", "compute_cap")  # compute_cap: drivers from 510 on
    if rows is None:
        rows = [[uuid, driver, ""] for uuid, driver in _nvidia_smi("uuid", "driver_version") or []]
    profile = detect_hardware()
    assert [(gpu.uuid, gpu.driver_version) for gpu in profile.gpus] == [
        (uuid, driver) for uuid, driver, _ in rows
    ]
    for gpu, (_, _, cap) in zip(profile.gpus, rows, strict=True):
        if cap:
            assert gpu.compute_capability == parse_compute_capability(cap)

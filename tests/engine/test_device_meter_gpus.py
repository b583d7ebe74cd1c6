"""Each CUDA device's report reads NVML's figures of that very card, however the two number the cards."""

from __future__ import annotations

import os

from engine.device_memory import DeviceMeter, build_report
from models.hardware.profile import GIB
from tests.fixtures.fake_nvml import FakeNvml, rtx_3060, rtx_4090

MIB = 1024**2
# A 3060 in the first PCI slot (NVML's 0) and a 4090 in the second: CUDA, fastest first, calls the 4090 0.
PCI_ORDER = (rtx_3060(11.0), rtx_4090(20.0))
PARTS = {"cpu": {}, "cuda:0": {"weights": 18 * 1024 * MIB}, "cuda:1": {"weights": 9 * 1024 * MIB}}


def test_cuda_names_pick_nvmls_card_where_the_orders_differ(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    names = {"cuda:0": "NVIDIA GeForce RTX 4090", "cuda:1": "NVIDIA GeForce RTX 3060"}
    meter = DeviceMeter(nvml=FakeNvml(*PCI_ORDER), pid=os.getpid())
    report = build_report(PARTS, meter, 0, 0, gpu_names=names)
    cards = {d.device: d for d in report.devices}
    assert (cards["cuda:0"].name, cards["cuda:0"].total_bytes, cards["cuda:0"].free_bytes) == (
        "NVIDIA GeForce RTX 4090", 24 * GIB, 20 * GIB)
    assert (cards["cuda:1"].name, cards["cuda:1"].total_bytes, cards["cuda:1"].free_bytes) == (
        "NVIDIA GeForce RTX 3060", 12 * GIB, 11 * GIB)


def test_without_names_cuda_and_nvml_count_alike(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    report = build_report(PARTS, DeviceMeter(nvml=FakeNvml(*PCI_ORDER), pid=os.getpid()), 0, 0)
    assert [d.name for d in report.devices if d.device != "cpu"] == ["NVIDIA GeForce RTX 3060",
                                                                    "NVIDIA GeForce RTX 4090"]

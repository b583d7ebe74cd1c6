"""The GPU acceptance check without a GPU: its dry run end to end, the wheel inventory, the report's schema."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.gpu.gguf_models import VOCAB_FILE, export_vocab
from tests.gpu.report import schema_problems
from tests.gpu.steps import STEPS
from tests.gpu.wheels import CARRY_LIMIT, REPO, missing_here, read_pins, take_inventory


def wheel(folder: Path, name: str, version: str, tag: str = "py3-none-any", members: tuple[str, ...] = ()) -> Path:
    """A wheel file by its name (the inventory reads names, sizes and, for the CUDA wheel, the members)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member in members or (f"{name}/__init__.py",):
            zf.writestr(member, "")
    return path


def carried(tmp: Path, cuda: bool = True) -> tuple[Path, Path]:
    """A deps folder with every pinned wheel, and a wheels folder with a CUDA llama-cpp-python wheel."""
    deps, wheels = tmp / "wheels" / "deps", tmp / "wheels"
    for pin in read_pins():
        wheel(deps, pin.name, pin.version)
    if cuda:
        wheel(wheels / "cuda13-90", "llama_cpp_python", "0.3.36", "py3-none-linux_x86_64",
              ("llama_cpp/__init__.py", "llama_cpp/lib/libggml-cuda.so"))
    return deps, wheels


def test_dry_run_runs_every_step_and_says_what_the_gpu_ones_would_run(tmp_path: Path) -> None:
    deps, wheels = carried(tmp_path)
    export_vocab(deps / VOCAB_FILE)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tests.gpu.check", "--dry-run", "--out", str(out), "--work", str(tmp_path / "work"),
         "--wheels", str(wheels), "--deps", str(deps)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert schema_problems(report) == []
    assert report["mode"] == "dry-run" and report["ok"]
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == [s.name for s in STEPS]
    for step in STEPS:
        got = steps[step.name]
        if step.needs_cuda:
            assert got["status"] == "skipped" and got["would_run"], got
        else:
            assert got["status"] == "pass", got
    # What the dry run prepared for the GPU: the twin from the carried vocabulary, its forecasts, the tests.
    models = steps["llama.models"]["details"]
    assert models["vocabulary"] == str(deps / VOCAB_FILE)
    assert models["forecast_cases"] == 2 * 27
    assert "tailor chat --model" in steps["llama.chat"]["would_run"]
    assert len(steps["torch.pytest"]["details"]["tests"]) >= 5
    assert steps["env.inventory"]["details"]["carry"][0].endswith("deps")
    text = (out / "report.txt").read_text()
    assert all(s.name in text for s in STEPS) and "would run:" in text


def test_inventory_says_what_is_missing_and_what_is_too_big(tmp_path: Path) -> None:
    deps, wheels = carried(tmp_path, cuda=False)
    absent = read_pins()[0]
    next(deps.glob(f"{absent.name.replace('-', '_')}-*.whl")).unlink()
    problems = " ".join(take_inventory(deps, wheels).problems())
    assert f"{absent.name}=={absent.version}" in problems and "make gpu-deps" in problems
    assert "make gpu-wheel ARCH=90" in problems

    wheel(deps, absent.name, absent.version)
    wheel(wheels / "cpu-build", "llama_cpp_python", "0.3.36", "py3-none-linux_x86_64")  # not under cuda*/
    cpu = wheel(wheels / "cuda13-90", "llama_cpp_python", "0.3.36", "py3-none-linux_x86_64", ("llama_cpp/lib/libggml.so",))
    assert "not a CUDA build" in " ".join(take_inventory(deps, wheels).problems())

    cpu.unlink()
    wheel(wheels / "cuda13-90", "llama_cpp_python", "0.3.36", "py3-none-linux_x86_64", ("llama_cpp/lib/libggml-cuda.so",))
    inv = take_inventory(deps, wheels)
    assert inv.problems() == [] and inv.carry[-1].endswith("cuda13-90/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl")
    with (deps / "big.bin").open("wb") as f:
        f.truncate(CARRY_LIMIT)
    assert "over the 64 MiB limit" in " ".join(take_inventory(deps, wheels).problems())


def test_inventory_refuses_wheels_the_gpu_machine_cannot_install(tmp_path: Path) -> None:
    deps, wheels = carried(tmp_path)
    cp311 = wheel(deps, "markupsafe", "3.0.4", "cp311-cp311-manylinux_2_17_x86_64")
    problems = " ".join(take_inventory(deps, wheels).problems())
    assert cp311.name in problems and "CPython 3.12" in problems


def test_only_the_wheels_this_python_lacks_are_installed(tmp_path: Path) -> None:
    have = wheel(tmp_path, "pytest", "0.0.1")  # this Python has pytest, whatever its version
    lacks = wheel(tmp_path, "tailor-not-a-real-distribution", "1.0")
    assert missing_here(tmp_path) == [lacks] and have.exists()


@pytest.mark.parametrize("breakage", ["skipped without would_run", "unknown status", "missing key"])
def test_schema_problems_name_what_is_wrong(breakage: str) -> None:
    step = {"name": "x", "title": "t", "needs_cuda": True, "target": "t", "status": "skipped", "figure": None,
            "value": None, "seconds": 0.1, "message": "", "would_run": "run it", "details": {}}
    report = {"schema": "tailor-gpu-check/1", "mode": "dry-run", "started_at": "now", "seconds": 1.0, "machine": {},
              "argv": [], "steps": [step], "summary": {}, "ok": True}
    assert schema_problems(report) == []
    if breakage == "skipped without would_run":
        step["would_run"] = None
    elif breakage == "unknown status":
        step["status"] = "maybe"
    else:
        del step["seconds"]
    assert len(schema_problems(report)) == 1

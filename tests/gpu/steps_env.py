"""The GPU check's first steps: what travelled, what imports, which GPU and CUDA libraries are there."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from tests.gpu.context import CheckContext
from tests.gpu.report import Outcome, judged, plan_only
from tests.gpu.wheels import EXPECTED_THERE, MIB, describe, normalize, read_pins, take_inventory

# Every module a step imports (the third-party ones by their distribution, for the version).
MODULES = {
    "llama_cpp": "llama-cpp-python", "torch": "torch", "numpy": "numpy", "transformers": "transformers",
    "tokenizers": "tokenizers", "safetensors": "safetensors", "gguf": "gguf", "jinja2": "jinja2",
    "huggingface_hub": "huggingface_hub", "psutil": "psutil", "platformdirs": "platformdirs",
    "pynvml": "nvidia-ml-py", "diskcache": "diskcache", "pytest": "pytest", "pytest_timeout": "pytest-timeout",
    "starlette": "starlette", "uvicorn": "uvicorn",
    "app.cli.main": None, "app.cli.chat": None, "app.services.planning.load_planner": None, "app.cli.mem": None, "engine.client": None,
    "engine.gguf.backend": None, "engine.gguf.devices": None, "engine.gguf.memory_report": None,
    "engine.torch.backend": None, "models.plan.forecast": None,
    "tests.bench.torch_engine": None, "tests.bench.forecast_accuracy": None, "tests.bench.bench_engine_overhead": None,
    "tests.fixtures.llama_buffers": None, "tests.fixtures.tiny_gguf": None, "tests.fixtures.tiny_hf": None,
    "tests.fixtures.hub_repos": None, "tests.gpu.steps_llama": None, "tests.gpu.steps_torch": None,
}
# Where ggml's CUDA backend finds cuBLAS and the CUDA runtime: PyPI's nvidia-* packages (torch's own), else
# the toolkit. The CUDA wheel's RPATH looks beside its own site-packages, which the check's --target folder is not.
NVIDIA_LIB_DIRS = ("cu13/lib", "cublas/lib", "cuda_runtime/lib")
TOOLKIT_LIB_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
SMI_GPU_FIELDS = ("name", "driver_version", "memory.total", "compute_cap")


def inventory(ctx: CheckContext) -> Outcome:
    inv = take_inventory(Path(ctx.deps), Path(ctx.wheels), Path(ctx.repo))
    problems = inv.problems()
    figure = f"{inv.total_bytes / MIB:.1f} MiB, {len(inv.deps)} wheels"
    details = {
        "deps": {w.path.name: w.size for w in inv.deps}, "cuda_wheel": str(inv.cuda_wheel.path) if inv.cuda_wheel else None,
        "cuda_libs": inv.cuda_libs, "tree_bytes": inv.tree_bytes, "deps_bytes": inv.deps_bytes,
        "cuda_wheel_bytes": inv.cuda_wheel.size if inv.cuda_wheel else 0, "total_bytes": inv.total_bytes,
        "carry": inv.carry, "expected_on_the_machine": list(EXPECTED_THERE), "table": describe(inv),
    }
    return judged(not problems, figure, inv.total_bytes / MIB, "\n".join(problems), **details)


def _origin(module: object) -> str:
    return str(Path(getattr(module, "__file__", "") or "?").parent)


def imports(ctx: CheckContext) -> Outcome:
    """Import every module the steps use, in this (fresh) process; versions and where each came from."""
    found, failed, untested = {}, {}, {}
    pins = {p.name: p.version for p in read_pins()}
    for name, dist in MODULES.items():
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any import failure is the finding
            hint = " (not carried: the machine's Python should have it)" if name in EXPECTED_THERE else ""
            failed[name] = f"{type(exc).__name__}: {exc}{hint}"
            continue
        version = ""
        if dist:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                version = getattr(module, "__version__", "?")
        found[name] = f"{version} {_origin(module)}".strip()
        tested = pins.get(normalize(dist or ""))
        if tested and version != tested:  # the machine's own copy, used instead of the carried one
            untested[name] = f"{version} (tested here with {tested})"
    message = "\n".join(f"{n}: {e}" for n, e in failed.items())
    return judged(not failed, f"{len(found)} of {len(MODULES)} import", len(found), message,
                  modules=found, failed=failed, other_versions=untested)


def nvidia_smi(*query: str, what: str = "gpu") -> list[list[str]] | None:
    """Rows of `nvidia-smi --query-<what>=...`, or None where there is no nvidia-smi or it fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, f"--query-{what}={','.join(query)}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.strip()]


def cuda_library_dirs() -> list[str]:
    """Folders holding libcublas.so.13 / libcudart.so.13 for ggml's CUDA backend, best first."""
    dirs = []
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        dirs += [str(Path(root, d)) for d in NVIDIA_LIB_DIRS if Path(root, d).is_dir()]
    if not any(Path(d, "libcublas.so.13").exists() for d in dirs):
        dirs += [d for d in TOOLKIT_LIB_DIRS if Path(d, "libcublas.so.13").exists() or Path(d, "libcudart.so.13").exists()]
    return list(dict.fromkeys(dirs))


def llama_env() -> dict[str, str]:
    """LD_LIBRARY_PATH for the llama.cpp steps: the CUDA library folders ahead of what is set already."""
    dirs = cuda_library_dirs()
    if not dirs:
        return {}
    current = os.environ.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": ":".join(dirs + ([current] if current else []))}


def installed_cuda_backend() -> Path | None:
    """libggml-cuda.so of the llama_cpp this Python imports (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    for folder in (package / "lib", package, package.parent / "bin", package.parent / "lib"):
        for path in sorted(folder.glob("libggml-cuda*.so*")) if folder.is_dir() else []:
            return path
    return None


def unresolved_libraries(library: Path, env: dict[str, str]) -> list[str]:
    """The shared libraries `ldd` cannot find for `library` under `env`."""
    try:
        out = subprocess.run(["ldd", str(library)], capture_output=True, text=True, timeout=30,
                             env={**os.environ, **env}).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [f"ldd failed: {exc}"]
    return [line.split("=>")[0].strip() for line in out.splitlines() if "not found" in line]


def _gpu_facts(ctx: CheckContext) -> dict:
    rows = nvidia_smi(*SMI_GPU_FIELDS)
    backend = installed_cuda_backend()
    return {
        "nvidia_smi": [dict(zip(SMI_GPU_FIELDS, r, strict=False)) for r in rows] if rows else None,
        "cuda_library_dirs": cuda_library_dirs(), "llama_env": ctx.llama_env,
        "libggml_cuda": str(backend) if backend else None,
        "unresolved": unresolved_libraries(backend, ctx.llama_env) if backend else None,
    }


def gpu(ctx: CheckContext) -> Outcome:
    """nvidia-smi sees the GPU, torch can use it, and ggml's CUDA backend finds every library it links."""
    import torch

    facts = _gpu_facts(ctx)
    facts["torch_cuda"] = torch.version.cuda
    facts["torch_sees_gpu"] = torch.cuda.is_available()
    problems = []
    if not facts["nvidia_smi"]:
        problems.append("nvidia-smi lists no GPU")
    if not facts["torch_sees_gpu"]:
        problems.append(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU")
    else:
        facts["torch_device"] = torch.cuda.get_device_name(0)
    if facts["libggml_cuda"] is None:
        problems.append("the installed llama_cpp has no libggml-cuda (a CPU build)")
    elif facts["unresolved"]:
        problems.append(f"libggml-cuda cannot find {', '.join(facts['unresolved'])} (LD_LIBRARY_PATH {ctx.llama_env})")
    first = (facts["nvidia_smi"] or [{}])[0]
    figure = f"{first.get('name', 'no GPU')}, driver {first.get('driver_version', '-')}"
    return judged(not problems, figure, None, "\n".join(problems), **facts)


def gpu_plan(ctx: CheckContext) -> Outcome:
    facts = _gpu_facts(ctx)
    return plan_only(
        f"nvidia-smi --query-gpu={','.join(SMI_GPU_FIELDS)}; torch.cuda.is_available(); "
        f"ldd {facts['libggml_cuda'] or '<llama_cpp>/lib/libggml-cuda.so'} with LD_LIBRARY_PATH from "
        f"{' or '.join(NVIDIA_LIB_DIRS)} under the nvidia package, or {TOOLKIT_LIB_DIRS[0]}",
        **facts,
    )

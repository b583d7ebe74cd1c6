"""Every step of the GPU check, in the order it runs, with its target and what it needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.gpu import steps_env, steps_llama, steps_torch
from tests.gpu.context import CheckContext
from tests.gpu.report import Outcome


@dataclass(slots=True, frozen=True)
class Step:
    """One check.

    run: the check itself (on CUDA in a GPU run, on the CPU in a rehearsal).
    plan: for a step that needs CUDA, what a dry run does instead: it prepares what it can and says what it
        would run.
    needs: steps whose results (files in the work folder) it uses; it is not run unless they passed.
    budget_s: about how long it takes on the GPU machine; it is not started with less time left.
    timeout_s: its process is killed after this long.
    rehearse: whether a CPU rehearsal can run it (False: it needs CUDA calls; the rehearsal plans it).
    """

    name: str
    title: str
    target: str
    run: Callable[[CheckContext], Outcome]
    plan: Callable[[CheckContext], Outcome] | None = None
    needs: tuple[str, ...] = ()
    budget_s: float = 10.0
    timeout_s: float = 120.0
    rehearse: bool = True

    @property
    def needs_cuda(self) -> bool:
        return self.plan is not None


STEPS = (
    Step("env.inventory", "the wheels and the tree that travel to the GPU machine",
         "every wheel of tests/gpu/wheels.txt, a CUDA llama-cpp-python wheel; all under 64 MiB",
         steps_env.inventory, budget_s=2, timeout_s=60),
    Step("env.imports", "every module the checks use imports (a fresh process)", "all import",
         steps_env.imports, budget_s=10, timeout_s=120),
    Step("env.gpu", "nvidia-smi, torch and ggml's CUDA backend see the GPU and their libraries",
         "a GPU in nvidia-smi and torch; libggml-cuda's libraries all found", steps_env.gpu, steps_env.gpu_plan,
         budget_s=5, timeout_s=60),
    Step("llama.models", "the starter's twin (random weights, Q4_1) and two tiny GGUF models; their forecasts",
         "written, headers read, the twin's tensor types the starter's", steps_llama.build, budget_s=20, timeout_s=180),
    Step("llama.devices", "ggml's device list (engine.gguf.devices)", "a CUDA device with its memory",
         steps_llama.devices, steps_llama.devices_plan, budget_s=5, timeout_s=60),
    Step("llama.chat", "`tailor chat` on CUDA", "every token asked for; weights and KV cache on cuda:0",
         steps_llama.chat, steps_llama.chat_plan, needs=("llama.models",), budget_s=20, timeout_s=180),
    Step("llama.forecast_full", "forecast vs llama.cpp's CUDA buffers, every layer on the GPU",
         "weights, KV, compute on cuda:0 within 5%", steps_llama.forecast_full, steps_llama.forecast_plan("full"),
         needs=("llama.models",), budget_s=30, timeout_s=240),
    Step("llama.forecast_half", "partial offload: half the layers on the GPU",
         "it generates; weights, KV, compute on cpu and cuda:0 within 5%", steps_llama.forecast_half,
         steps_llama.forecast_plan("half"), needs=("llama.models",), budget_s=30, timeout_s=240),
    Step("llama.memory", "the memory report's per-process VRAM vs nvidia-smi",
         "within 2% of nvidia-smi's figure for the engine's pid", steps_llama.memory, steps_llama.memory_plan,
         needs=("llama.models",), budget_s=20, timeout_s=180),
    Step("llama.overhead", "`tailor chat` decode tok/s / bare llama-cpp-python's, same wheel and file",
         ">= 0.97", steps_llama.overhead, steps_llama.overhead_plan, needs=("llama.models",), budget_s=60,
         timeout_s=300),
    Step("torch.pytest", "pytest -m gpu (the engine's and the hardware's GPU tests)",
         "all pass, none skipped", steps_torch.pytest_gpu, steps_torch.pytest_plan, budget_s=60, timeout_s=400),
    Step("torch.models", "dense fp16 and AWQ int4 folders of a 1.1B Llama (random weights)",
         "written, AWQ config", steps_torch.build, budget_s=60, timeout_s=300),
    Step("torch.pool", "the GPU pool share honoured (gpu_memory_fraction)",
         f"pool within {steps_torch.POOL_TOLERANCE:.0%} of its share; the rest left free", steps_torch.pool,
         steps_torch.pool_plan, needs=("torch.models",), budget_s=25, timeout_s=180, rehearse=False),
    Step("torch.awq", "AWQ int4 decode vs the bandwidth limit and vs dense fp16",
         f"AWQ / dense >= {steps_torch.AWQ_OVER_DENSE} (share of peak shown)", steps_torch.awq, steps_torch.awq_plan,
         needs=("torch.models",), budget_s=40, timeout_s=240),
    Step("torch.graphs", "CUDA-graph decode on vs off", f"on / off >= {steps_torch.GRAPHS_OVER_EAGER}",
         steps_torch.graphs, steps_torch.graphs_plan, needs=("torch.models",), budget_s=25, timeout_s=180),
    Step("torch.streams", f"{steps_torch.STREAMS} streams vs 1", f">= {steps_torch.STREAMS_OVER_ONE}x aggregate tok/s",
         steps_torch.streams, steps_torch.streams_plan, needs=("torch.models",), budget_s=25, timeout_s=180),
)
BY_NAME = {s.name: s for s in STEPS}

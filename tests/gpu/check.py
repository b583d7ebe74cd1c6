"""The GPU acceptance check (issue 15): every GPU check in one go, one report (report.json + report.txt).

    python -m tests.gpu.check [--dry-run | --rehearse] [--out DIR] [--only NAME ...] [--seconds S]

On a GPU machine every step runs in its own process (tests/gpu/step_runner.py), so a crash or a hang in
llama.cpp or CUDA costs that step alone, with a timeout each and one deadline for all (the report is
written after every step, so even a run cut short leaves one). `--dry-run` runs here what needs no CUDA
(the inventory, the imports, building the models, reading their headers, the forecasts, collecting the GPU
tests) and says for every other step what it would run. `--rehearse` runs every step's own code on the
CPU at a small size, figures not judged: the way to find a broken step before a GPU is lent.
tests/gpu/run.sh is the one command for the GPU machine (offline installs, then this).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path

from tests.gpu.context import CheckContext
from tests.gpu.report import Outcome, StepResult, build_report, render_text, write_report
from tests.gpu.steps import BY_NAME, STEPS, Step
from tests.gpu.steps_env import llama_env, nvidia_smi
from tests.gpu.wheels import DEFAULT_WHEELS, REPO

# A GPU run's whole budget: run.sh gives the machine 8 minutes, less what its installs took.
DEFAULT_SECONDS = 450.0
# Kept back at the end to write the report.
RESERVE_S = 5.0
LOG_NAME = "steps.log"
# Steps that run in their own process in a dry run too (a fresh interpreter is the point of them).
ISOLATED_IN_DRY_RUN = ("env.imports",)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu.check", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="run what needs no CUDA; say what the rest would run")
    mode.add_argument("--rehearse", action="store_true", help="run every step's code on the CPU, small, unjudged")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "gpu-report", help="the report's folder")
    parser.add_argument("--work", type=Path, help="scratch folder for the models (default: a new temporary one)")
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS, help="where the CUDA wheel's folder is")
    parser.add_argument("--deps", type=Path, help="the dependency wheels (default: WHEELS/deps)")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="the deadline for every step")
    parser.add_argument("--full-models", action="store_true", help="dry run / rehearsal: models at their GPU size")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=sorted(BY_NAME),
                        help="run these steps (and no others; those they need must have run in --work)")
    parser.add_argument("--list", action="store_true", help="list the steps and their targets, then exit")
    return parser.parse_args(argv)


def machine_facts() -> dict:
    gpus = nvidia_smi("name", "driver_version", "memory.total")
    facts = {"host": platform.node(), "python": platform.python_version(), "platform": platform.platform(),
             "executable": sys.executable, "gpu": None, "cpus": os.cpu_count()}
    if gpus:
        name, driver, mib = (gpus[0] + ["", "", ""])[:3]
        facts.update(gpu=name, driver=driver, gpu_memory_mib=mib, gpus=len(gpus))
    for dist in ("torch", "llama-cpp-python"):
        try:
            facts[dist.split("-")[0]] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            facts[dist.split("-")[0]] = None
    return facts


def run_in_process(step: Step, ctx: CheckContext, plan: bool) -> Outcome:
    try:
        return (step.plan if plan else step.run)(ctx)
    except Exception as exc:  # noqa: BLE001 - a broken step is reported, the others still run
        return Outcome("error", message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-4)}")


def run_in_child(step: Step, ctx: CheckContext, timeout: float, log: Path) -> Outcome:
    """The step in a fresh Python process (its own session, so a timeout ends its engines too)."""
    folder = Path(ctx.work)
    context, result = ctx.save(folder / f"context-{step.name}.json"), folder / f"result-{step.name}.json"
    result.unlink(missing_ok=True)
    env = {**os.environ, **(ctx.llama_env if step.name.startswith(("llama.", "env.")) else {})}
    with log.open("a") as out:
        out.write(f"\n===== {step.name} ({datetime.datetime.now().isoformat(timespec='seconds')})\n")
        out.flush()
        child = subprocess.Popen([sys.executable, "-m", "tests.gpu.step_runner", step.name, str(context), str(result)],
                                 cwd=ctx.repo, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return Outcome("error", message=f"timed out after {timeout:.0f} s (its process group was killed)")
    if result.exists():
        return Outcome.from_dict(json.loads(result.read_text()))
    tail = log.read_text(errors="replace").splitlines()[-12:]
    return Outcome("error", message=f"its process exited {code} without a result; the end of its log:\n" + "\n".join(tail))


def run_step(step: Step, ctx: CheckContext, done: dict[str, str], log: Path) -> Outcome:
    missing = [n for n in step.needs if done.get(n) not in ("pass", "rehearsed")]
    if missing:
        return Outcome("not_run", message=f"needs {', '.join(missing)}, which did not pass")
    left = ctx.seconds_left() - RESERVE_S
    if ctx.mode != "dry-run" and left < step.budget_s:
        return Outcome("not_run", message=f"out of time: {left:.0f} s left, it takes about {step.budget_s:.0f} s")
    if ctx.mode == "dry-run":
        if step.needs_cuda:
            return run_in_process(step, ctx, plan=True)
        if step.name in ISOLATED_IN_DRY_RUN:
            return run_in_child(step, ctx, step.timeout_s, log)
        return run_in_process(step, ctx, plan=False)
    if ctx.mode == "rehearse" and step.needs_cuda and not step.rehearse:
        return run_in_process(step, ctx, plan=True)
    outcome = run_in_child(step, ctx, min(step.timeout_s, left), log)
    if ctx.mode == "rehearse" and step.needs_cuda and outcome.status in ("pass", "fail"):
        figures_say = outcome.status
        outcome.status = "rehearsed"
        outcome.message = f"CPU rehearsal, not judged (these figures would {figures_say})" + (
            f"\n{outcome.message}" if outcome.message else "")
    return outcome


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for step in STEPS:
            print(f"{step.name:<20} {'CUDA ' if step.needs_cuda else '     '}{step.title}; target: {step.target}")
        return 0
    mode = "dry-run" if args.dry_run else "rehearse" if args.rehearse else "gpu"
    started, t0 = datetime.datetime.now(datetime.UTC), time.monotonic()
    work = args.work or Path(tempfile.mkdtemp(prefix="tailor-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = CheckContext(mode=mode, repo=str(REPO), out=str(args.out), work=str(work), wheels=str(args.wheels),
                       deps=str(args.deps or args.wheels / "deps"), deadline=time.time() + args.seconds,
                       full_models=args.full_models, llama_env=llama_env())
    log = args.out / LOG_NAME
    machine = {**machine_facts(), "work": str(work)}
    print(f"GPU acceptance check ({mode}): {machine.get('gpu') or 'no NVIDIA GPU'}; report in {args.out}", flush=True)
    results: list[StepResult] = []
    selected = [BY_NAME[n] for n in args.only] if args.only else list(STEPS)
    # With --only, what the selected steps need is taken as made by an earlier run in the same --work.
    done = {n: "pass" for s in selected for n in s.needs if n not in {t.name for t in selected}}
    argv_list = sys.argv[1:] if argv is None else list(argv)
    for step in selected:
        t = time.monotonic()
        outcome = run_step(step, ctx, done, log)
        results.append(StepResult(step.name, step.title, step.needs_cuda, step.target, outcome, time.monotonic() - t))
        done[step.name] = outcome.status
        figure = f"  {outcome.figure}" if outcome.figure else ""
        print(f"[{outcome.status.upper():^9}] {step.name:<20}{figure}  ({time.monotonic() - t:.1f} s)", flush=True)
        report = build_report(mode, started.isoformat(timespec="seconds"), time.monotonic() - t0, machine, argv_list, results)
        write_report(report, args.out)
    print()
    print(render_text(report), end="")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

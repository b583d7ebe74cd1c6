"""The GPU check's report: one result per step, written as JSON (report.json) and as text (report.txt).

A step's status is one of STATUSES:
- pass / fail: the step ran and its figure met / missed its target;
- skipped: a dry run did not run it (it needs CUDA); `would_run` says what it would run;
- rehearsed: a CPU rehearsal ran its code to the end on the CPU; the figure is not judged;
- error: the step broke (an exception, a crash, a timeout); `message` says how;
- not_run: it was not started (out of time, or a step it needs did not pass).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "tailor-gpu-check/1"
STATUSES = ("pass", "fail", "skipped", "rehearsed", "error", "not_run")
MODES = ("gpu", "dry-run", "rehearse")
# Every key of a step in report.json, with its JSON type(s).
STEP_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,), "title": (str,), "needs_cuda": (bool,), "target": (str,), "status": (str,),
    "figure": (str, type(None)), "value": (int, float, type(None)), "seconds": (int, float),
    "message": (str,), "would_run": (str, type(None)), "details": (dict,),
}
REPORT_KEYS = ("schema", "mode", "started_at", "seconds", "machine", "argv", "steps", "summary", "ok")


@dataclass(slots=True)
class Outcome:
    """What a step function returns; the orchestrator adds its name, time and, in a rehearsal, the status."""

    status: str
    figure: str | None = None
    value: float | None = None
    message: str = ""
    would_run: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(**{k: data[k] for k in ("status", "figure", "value", "message", "would_run", "details") if k in data})


def judged(ok: bool, figure: str, value: float | None = None, message: str = "", **details: Any) -> Outcome:
    """A pass or a fail, by `ok`."""
    return Outcome("pass" if ok else "fail", figure, value, message, None, details)


def plan_only(would_run: str, message: str = "needs CUDA: not run in a dry run", **details: Any) -> Outcome:
    """A dry run's answer for a step that needs the GPU: what it would run, and what it prepared."""
    return Outcome("skipped", None, None, message, would_run, details)


@dataclass(slots=True)
class StepResult:
    name: str
    title: str
    needs_cuda: bool
    target: str
    outcome: Outcome
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "needs_cuda": self.needs_cuda, "target": self.target,
                **self.outcome.to_dict(), "seconds": round(self.seconds, 2)}


def summary(results: list[StepResult]) -> dict[str, int]:
    counts = Counter(r.outcome.status for r in results)
    return {status: counts.get(status, 0) for status in STATUSES}


def build_report(mode: str, started_at: str, seconds: float, machine: dict[str, Any], argv: list[str],
                 results: list[StepResult]) -> dict[str, Any]:
    counts = summary(results)
    return {
        "schema": SCHEMA, "mode": mode, "started_at": started_at, "seconds": round(seconds, 1), "machine": machine,
        "argv": argv, "steps": [r.to_dict() for r in results], "summary": counts,
        # A dry run or a rehearsal is ok when nothing broke; a GPU run when every step passed.
        "ok": counts["error"] == 0 and counts["fail"] == 0 and (mode != "gpu" or counts["pass"] == len(results)),
    }


def schema_problems(report: dict[str, Any]) -> list[str]:
    """What is wrong with a report against the schema above (empty when nothing is)."""
    problems = [f"missing key {k!r}" for k in REPORT_KEYS if k not in report]
    if report.get("schema") != SCHEMA:
        problems.append(f"schema is {report.get('schema')!r}, not {SCHEMA!r}")
    if report.get("mode") not in MODES:
        problems.append(f"mode {report.get('mode')!r} is not one of {MODES}")
    for i, step in enumerate(report.get("steps", [])):
        for key, types in STEP_KEYS.items():
            if key not in step:
                problems.append(f"step {i} ({step.get('name')}): missing {key!r}")
            elif not isinstance(step[key], types) or (isinstance(step[key], bool) and bool not in types):
                problems.append(f"step {i} ({step.get('name')}): {key!r} is {type(step[key]).__name__}")
        if step.get("status") not in STATUSES:
            problems.append(f"step {i} ({step.get('name')}): status {step.get('status')!r}")
        if step.get("status") == "skipped" and not step.get("would_run"):
            problems.append(f"step {i} ({step.get('name')}): skipped without saying what it would run")
    return problems


def render_text(report: dict[str, Any]) -> str:
    """The report for people: one block per step, then the summary."""
    m = report["machine"]
    gpu = m.get("gpu") or "no NVIDIA GPU"
    lines = [
        f"Tailor GPU acceptance check ({report['mode']}), {report['started_at']}",
        f"machine: {m.get('host', '?')}, {gpu}, Python {m.get('python', '?')}, torch {m.get('torch', '?')}",
        "",
    ]
    for step in report["steps"]:
        figure = step["figure"] if step["figure"] is not None else "-"
        lines.append(f"[{step['status'].upper():^9}] {step['name']:<20} {figure:<28} {step['seconds']:7.1f} s")
        lines.append(f"{'':12}{step['title']}; target: {step['target']}")
        if step["message"]:
            lines.extend(f"{'':12}{line}" for line in step["message"].splitlines())
        if step["would_run"]:
            lines.extend(f"{'':12}would run: {line}" for line in step["would_run"].splitlines())
    counts = report["summary"]
    lines += ["", "summary: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
              + f" in {report['seconds']:.0f} s; {'OK' if report['ok'] else 'NOT OK'}"]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, text_path = out / "report.json", out / "report.txt"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    text_path.write_text(render_text(report))
    return json_path, text_path

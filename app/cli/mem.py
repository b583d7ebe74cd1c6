"""`tailor mem [--json]`: where a running engine's memory goes; and the `--mem` line of `tailor chat`.

Every engine (the window's, `tailor chat`'s, `tailor serve`'s) keeps a status file with its
latest memory report and the forecast of its load settings in the user cache dir
(AppPaths.engine_status; written by engine.status_file). This command reads the files of
engines that are still running; files left by an engine that was killed are removed. No Qt.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

import psutil

from app.chat.stats_line import sequences_text
from app.services.paths import AppPaths
from engine.client import EngineClient
from engine.protocol import DeviceMemory, MemoryReport
from models.units import human_size

# The keys of one device in the JSON line, in the order the issue gives them; then the extras.
DEVICE_KEYS = (
    "device", "weights_bytes", "kv_allocated_bytes", "kv_used_bytes", "kv_used_tokens", "compute_bytes",
    "prefix_cache_bytes", "other_bytes", "free_bytes", "total_bytes", "kv_total_tokens", "name", "draft_bytes", "projector_bytes",
)
NO_ENGINE = "No Tailor engine is running."
# How long `tailor chat --mem` waits for the report the engine sends after a reply.
FINAL_REPORT_TIMEOUT_S = 10.0


def add_mem_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `mem` subcommand to `parser.add_subparsers()`; it runs `run_mem`."""
    mem = subparsers.add_parser("mem", help="show where the memory of a running engine goes")
    mem.add_argument("--json", action="store_true", help="print one JSON line per running engine")
    mem.set_defaults(func=run_mem)
    return mem


def run_mem(args: argparse.Namespace, directory: Path | None = None) -> int:
    """Print the memory of every running engine; 1 (and a plain sentence) when none runs."""
    engines = live_engines(directory or AppPaths.default().engine_status)
    if not engines:
        print(NO_ENGINE)
        return 1
    for status in engines:
        if getattr(args, "json", False):
            line = memory_json(MemoryReport.from_dict(status["memory"]), status.get("forecast"))
            print(json.dumps({"pid": status["pid"], "model": status.get("model"), **line}))
        else:
            print(format_status(status))
    return 0


def memory_json(report: MemoryReport, forecast: dict | None) -> dict:
    """The JSON of a report: its devices (keys as DEVICE_KEYS) and the forecast as in the plan."""
    return {
        "devices": [{key: getattr(d, key) for key in DEVICE_KEYS} for d in report.devices],
        "kv_tokens_used": report.kv_tokens_used,
        "kv_tokens_total": report.kv_tokens_total,
        "prefix_cache_disk_bytes": report.prefix_cache_disk_bytes,
        "kv_shared_tokens": report.kv_shared_tokens,
        "kv_shared_bytes": report.kv_shared_bytes,
        "kv_cached_tokens": report.kv_cached_tokens,
        "forecast": forecast,
    }


def final_report(client: EngineClient, timeout: float = FINAL_REPORT_TIMEOUT_S) -> MemoryReport | None:
    """The memory report the engine sends right after a reply's Done (None if none comes)."""
    while (event := client.next_event(timeout=timeout)) is not None:
        if isinstance(event, MemoryReport):
            return event
    return None


def live_engines(directory: Path) -> list[dict]:
    """The status of every engine still running, by pid; stale files (dead engines) are removed."""
    out = []
    for path in sorted(directory.glob("engine-*.json")):
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
            pid, started = int(status["pid"]), float(status.get("started", 0))
            MemoryReport.from_dict(status["memory"])
        except (OSError, ValueError, KeyError, TypeError):
            # Unreadable (another version, a damaged disk): not trusted; an engine that is
            # still running rewrites its own file at its next report.
            continue
        if _running(pid, started):
            out.append(status)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return out


def _running(pid: int, started: float) -> bool:
    try:
        process = psutil.Process(pid)
        # A pid the OS gave to a newer process is not our engine.
        return process.is_running() and (not started or abs(process.create_time() - started) < 1.0)
    except psutil.Error:
        return False


def format_status(status: dict) -> str:
    """One engine's memory as a few lines of text, each part beside its forecast."""
    report = MemoryReport.from_dict(status["memory"])
    model = status.get("model")
    forecast = (status.get("forecast") or {}).get("devices", {})
    if model:
        head = (
            f"Engine {status['pid']}: {model['name']} (context {model['n_ctx']:,}, KV {model['kv_type']}, "
            f"flash attention {'on' if model['flash_attn'] else 'off'}, {model['n_gpu_layers']} GPU layers)"
        )
    else:
        head = f"Engine {status['pid']}: no model loaded"
    lines = [head]
    for device in report.devices:
        lines += _device_lines(device, forecast.get(device.device))
    if report.kv_tokens_total:
        lines.append(
            f"KV cache: {report.kv_tokens_used:,} / {report.kv_tokens_total:,} tokens in use{sequences_text(report)}; "
            f"room for {report.kv_tokens_total - report.kv_tokens_used:,} more tokens of context"
        )
    if report.kv_shared_tokens:
        # KV blocks several sequences read (the PyTorch engine's prefix caching, e.g. a shared system prompt).
        lines.append(
            f"Shared prefixes: {report.kv_shared_tokens:,} tokens ({human_size(report.kv_shared_bytes)}) stored once"
        )
    if report.kv_cached_tokens:
        lines.append(f"Kept for reuse: {report.kv_cached_tokens:,} tokens of finished replies' prefixes, in free KV blocks")
    if report.prefix_cache_disk_bytes:
        lines.append(f"Prefix cache on disk: {human_size(report.prefix_cache_disk_bytes)}")
    return "\n".join(lines)


def _device_lines(d: DeviceMemory, forecast: dict | None) -> list[str]:
    def row(label: str, n: int, key: str | None = None) -> str:
        planned = f"   (forecast {human_size(forecast[key])})" if forecast and key in forecast else ""
        return f"  {label:<13}{human_size(n):>10}{planned}"

    rows = [
        f"{d.name or d.device} ({d.device}): {human_size(d.total_bytes)} total, {human_size(d.free_bytes)} free",
        row("weights", d.weights_bytes, "weights_bytes"),
        row("KV cache", d.kv_allocated_bytes, "kv_cache_bytes") + f"   {human_size(d.kv_used_bytes)} in use",
        row("compute", d.compute_bytes, "compute_bytes"),
    ]
    if d.prefix_cache_bytes:
        rows.append(row("prefix cache", d.prefix_cache_bytes))
    if d.draft_bytes:
        rows.append(row("draft model", d.draft_bytes))
    if d.projector_bytes:
        rows.append(row("projector", d.projector_bytes, "projector_bytes"))
    rows.append(row("other", d.other_bytes))
    return rows

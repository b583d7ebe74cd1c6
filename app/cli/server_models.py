"""`tailor ps` and `tailor unload NAME`: what a running `tailor serve` (or the window's server) holds, and
unloading one of its models, as `ollama ps` and `ollama stop` do, through the server's Ollama API."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime

import httpx

from app.server.config import DEFAULT_PORT
from models.units import gb

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
TIMEOUT_S = 30.0


def add_server_models_parsers(sub: argparse._SubParsersAction) -> None:
    for name, help_, handler in (("ps", "the models a running server holds: memory, where, idle time", run_ps),
                                 ("unload", "unload a model from a running server (once its replies end)",
                                  run_unload)):
        parser = sub.add_parser(name, help=help_)
        if name == "unload":
            parser.add_argument("name", help="the model, by any of its names (tailor ps, GET /v1/models)")
        parser.add_argument("--url", default=DEFAULT_URL, help="the server (%(default)s)")
        parser.add_argument("--api-key", default=os.environ.get("TAILOR_API_KEY"),
                            help="the server's key, if it has one (default: $TAILOR_API_KEY)")
        parser.set_defaults(func=handler)


def run_ps(args: argparse.Namespace) -> int:
    answer = _request(args, "GET", "/api/ps")
    if answer is None:
        return 1
    models = answer.json().get("models", [])
    if not models:
        print("No model is loaded.")
        return 0
    rows = [("NAME", "MEMORY", "WHERE", "CONTEXT", "UNLOADS")]
    for m in models:
        size, vram = int(m.get("size") or 0), int(m.get("size_vram") or 0)
        rows.append((m.get("name", "?"), gb(size), _where(size, vram), f"{m.get('context_length') or '?'}",
                     _until(m.get("expires_at"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def run_unload(args: argparse.Namespace) -> int:
    answer = _request(args, "POST", "/api/generate", {"model": args.name, "keep_alive": 0})
    if answer is None:
        return 1
    print(f"Unloading {args.name} (once its replies end).")
    return 0


def _request(args: argparse.Namespace, method: str, path: str, body: dict | None = None) -> httpx.Response | None:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    url = args.url.rstrip("/").removesuffix("/v1") + path
    try:
        answer = httpx.request(method, url, json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        print(f"tailor: error: no server answers at {args.url} ({exc}); start one with `tailor serve`",
              file=sys.stderr)
        return None
    if answer.status_code >= 400:
        try:
            message = answer.json().get("error")
            message = message.get("message") if isinstance(message, dict) else message
        except ValueError:
            message = answer.text[:200]
        print(f"tailor: error: {message or answer.status_code}", file=sys.stderr)
        return None
    return answer


def _where(size: int, vram: int) -> str:
    if not size or not vram:
        return "CPU"
    if vram >= size:
        return "GPU"
    return f"{100 * vram // size}% GPU"


def _until(expires_at: str | None) -> str:
    if not expires_at:
        return "never"
    try:
        when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return expires_at
    left = (when - datetime.now(UTC)).total_seconds()
    if left > 10 * 365 * 86400:  # Ollama's way to say never: a date far ahead
        return "never"
    return "now" if left <= 0 else f"in {left / 60:.0f} min" if left >= 90 else f"in {left:.0f} s"

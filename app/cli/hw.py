"""`tailor hw [--json]`: the GPUs, RAM and CPU Tailor sees. No Qt."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.services.planning.machine import detect_machine
from app.services.planning.profile_text import format_profile
from models.hardware.profile import NvmlApi


def add_hw_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `hw` subcommand to `parser.add_subparsers()`; it runs `run_hw`."""
    hw = subparsers.add_parser("hw", help="show the GPUs, RAM and CPU that Tailor sees, and what llama.cpp can use")
    hw.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    hw.set_defaults(func=run_hw)
    return hw


def run_hw(args: argparse.Namespace, nvml: NvmlApi | None = None) -> int:
    """Detect the hardware and print it; detection never fails, so this returns 0.

    Args:
        args: Parsed arguments; `args.json` selects one line of JSON.
        nvml: The NVML to ask (tests); default: pynvml.
    """
    profile = detect_machine(nvml, always_probe=True)
    if getattr(args, "json", False):
        print(json.dumps(profile.to_dict()))
    else:
        print(format_profile(profile))
    return 0

"""`tailor presets [add|rm]` and `tailor chat --preset NAME`: presets from the command line. No Qt."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from app.cli.errors import CliError
from app.services.chat_defaults import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SYSTEM_PROMPT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
)
from app.services.history.store import ChatStore, Preset
from app.services.paths import AppPaths


class PresetError(CliError):
    """A preset that does not exist or cannot be saved; one line for the user."""


def add_preset_parser(subparsers: Any) -> None:
    """Add `presets` (list), `presets add` and `presets rm` to `parser.add_subparsers()`."""
    presets = subparsers.add_parser("presets", help="list, add or remove presets (system prompt + sampling)")
    presets.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    presets.set_defaults(func=run_list)
    sub = presets.add_subparsers(dest="preset_command")
    add = sub.add_parser("add", help="add a preset, or replace the one of the same name")
    add.add_argument("name")
    add.add_argument("--system", required=True, help="its system prompt")
    add.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    add.add_argument("--top-p", type=float, default=DEFAULT_TOP_P)
    add.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    add.add_argument("--pin", action="store_true", help="prefill its system prompt whenever a model loads")
    add.set_defaults(func=run_add)
    rm = sub.add_parser("rm", help="delete a preset")
    rm.add_argument("name")
    rm.set_defaults(func=run_rm)


def _open_store() -> ChatStore:
    return ChatStore(AppPaths.default().chat_db, recover=False)  # a window may be writing a reply now


def run_list(args: argparse.Namespace) -> int:
    store = _open_store()
    try:
        presets = store.list_presets()
    finally:
        store.close()
    if args.json:
        print(json.dumps({"presets": [asdict(p) for p in presets]}))
        return 0
    for p in presets:
        pin = " (pinned: prefilled at load)" if p.pinned else ""
        print(f"{p.name}{pin}: temperature {p.temperature}, top-p {p.top_p}, max {p.max_tokens} tokens")
        print(f"    {p.system_prompt}")
    return 0


def run_add(args: argparse.Namespace) -> int:
    preset = Preset(args.name.strip(), args.system, args.temperature, args.top_p, args.max_tokens, args.pin)
    store = _open_store()
    try:
        store.save_preset(preset)
    except ValueError as exc:
        raise PresetError(str(exc)) from None
    finally:
        store.close()
    print(f"Saved preset {preset.name}" + (" (pinned)" if preset.pinned else ""))
    return 0


def run_rm(args: argparse.Namespace) -> int:
    store = _open_store()
    try:
        if not store.delete_preset(args.name):
            raise PresetError(f"No preset named {args.name!r} (see `tailor presets`).")
    finally:
        store.close()
    print(f"Deleted preset {args.name}")
    return 0


def apply_chat_preset(args: argparse.Namespace) -> None:
    """Fill `tailor chat`'s system prompt and sampling from `--preset`; options given with a
    value other than their default win over the preset."""
    store = _open_store()
    try:
        preset = store.get_preset(args.preset)
    finally:
        store.close()
    if preset is None:
        raise PresetError(f"No preset named {args.preset!r} (see `tailor presets`).")
    for option, default, value in (
        ("system", DEFAULT_SYSTEM_PROMPT, preset.system_prompt),
        ("temperature", DEFAULT_TEMPERATURE, preset.temperature),
        ("top_p", DEFAULT_TOP_P, preset.top_p),
        ("max_tokens", DEFAULT_MAX_TOKENS, preset.max_tokens),
    ):
        if getattr(args, option) == default:
            setattr(args, option, value)

"""`tailor chat`'s options that shape the reply: --reasoning, --think-budget, --json-schema."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.protocol import ReplyShape
from engine.structured.json_schema_grammar import SchemaError, check_schema

REASONING = ("auto", "on", "off", "low", "medium", "high")


def add_reply_arguments(chat: argparse.ArgumentParser) -> None:
    chat.add_argument(
        "--reasoning", choices=REASONING, default="auto",
        help="a reasoning model thinks (on), answers at once (off), or thinks with this effort (low/medium/high, "
        "gpt-oss); auto: as its template does by default. Its thinking goes to stderr",
    )
    chat.add_argument(
        "--think-budget", type=_budget, metavar="N",
        help="reasoning tokens after which the model must answer (the think block is closed for it)",
    )
    chat.add_argument(
        "--json-schema", type=Path, metavar="FILE",
        help="the answer is JSON that follows this JSON Schema (decoding is constrained to it)",
    )


def reply_shape(args: argparse.Namespace, error: type[Exception]) -> ReplyShape:
    """The shape asked for; `error` (one line) for a schema that is unreadable or cannot be followed."""
    schema = None
    if args.json_schema is not None:
        try:
            document = json.loads(args.json_schema.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise error(f"--json-schema {args.json_schema}: cannot read it as JSON ({exc})") from None
        try:
            check_schema(document)
        except SchemaError as exc:
            raise error(f"--json-schema {args.json_schema}: {exc}") from None
        schema = json.dumps(document)
    return ReplyShape(reasoning=args.reasoning, think_budget=args.think_budget, json_schema=schema)


def _budget(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more tokens, not {text}")
    return value

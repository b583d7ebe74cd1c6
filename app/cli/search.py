"""`tailor search QUERY [--gguf|--awq] [--json]`: model repos on the hub (HF_ENDPOINT selects it)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from models.hub.client import HubClient, HubError, RepoSummary

# Tags worth showing in one line: formats and quantizations, not every language and task.
TAGS_OF_INTEREST = ("gguf", "awq", "gptq", "fp8", "safetensors", "imatrix", "conversational", "text-generation")


def add_search_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("search", help="search model repos on the Hugging Face hub")
    parser.add_argument("query", nargs="?", default="", help="text to look for in repo names")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--gguf", action="store_const", const="gguf", dest="kind", help="GGUF repos only")
    kind.add_argument("--awq", action="store_const", const="awq", dest="kind", help="AWQ repos only")
    kind.add_argument("--gptq", action="store_const", const="gptq", dest="kind", help="GPTQ repos only")
    kind.add_argument("--fp8", action="store_const", const="fp8", dest="kind", help="FP8 repos only")
    parser.add_argument("--sort", choices=("downloads", "recent"), default="downloads",
                        help="most downloaded or most recently changed first (%(default)s)")
    parser.add_argument("--limit", type=int, default=20, help="at most this many repos (%(default)s)")
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    parser.set_defaults(func=run_search, kind=None)
    return parser


def run_search(args: argparse.Namespace) -> int:
    try:
        repos = HubClient().search(args.query, kind=args.kind, sort=args.sort, limit=max(1, args.limit))
    except HubError as exc:
        print(f"tailor: error: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([repo_dict(r) for r in repos]))
    elif not repos:
        print(f"No repos match {args.query!r}.", file=sys.stderr)
    else:
        print("\n".join(format_repo(r) for r in repos))
    return 0


def repo_dict(r: RepoSummary) -> dict[str, Any]:
    return {"id": r.id, "downloads": r.downloads, "likes": r.likes,
            "last_modified": r.last_modified.isoformat() if r.last_modified else None,
            "tags": list(r.tags), "gated": r.gated, "private": r.private}


def format_repo(r: RepoSummary) -> str:
    when = r.last_modified.strftime("%Y-%m-%d") if r.last_modified else "?"
    tags = [t for t in TAGS_OF_INTEREST if t in r.tags] + (["gated"] if r.gated else [])
    return f"{r.id:<50} {r.downloads:>10,} downloads  {when}  {' '.join(tags)}".rstrip()

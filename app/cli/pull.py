"""`tailor pull`: download a model's files from the hub into the Hugging Face cache, verified."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from app.services.paths import AppPaths
from app.services.planning.draft_finder import library_drafts
from app.services.planning.machine import detect_machine
from app.services.planning.pull_plan import (
    build_request,
    projector_fit,
    projector_for,
    torch_available,
    with_extras,
)
from models.download.downloader import Downloader
from models.download.request import DownloadError, Progress
from models.formats.errors import InvalidModelFile
from models.hardware.profile import HardwareProfile
from models.hub.client import HubClient, HubError, RepoDetails
from models.hub.draft_suggestions import DraftSuggestion, draft_for
from models.hub.repo_files import group_files
from models.plan.decision_tree import make_plan
from models.plan.machine import Machine
from models.plan.sources import repo_candidates


class PullError(Exception):
    """Nothing to download for what was asked; printed as one line."""


def add_pull_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("pull", help="download a model from the hub, checksums verified")
    parser.add_argument("repo", help="a Hugging Face repo id, e.g. org/Model-GGUF")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--file", help="this file (a split set comes whole)")
    which.add_argument("--quant", help="the GGUF file of this quantization level, e.g. Q4_K_M")
    which.add_argument("--auto", action="store_true", help="the file the plan picks for this machine (default)")
    parser.add_argument("--revision", default="main", help="branch, tag or commit (%(default)s)")
    parser.add_argument("--ctx", type=int, default=4096, help="context length the plan aims for (%(default)s)")
    parser.add_argument(
        "--with-draft", action="store_true",
        help="also fetch the small model of the same family that drafts for it (speculative decoding: faster "
        "replies on Auto), when there is one",
    )
    parser.set_defaults(func=run_pull)
    return parser


def run_pull(args: argparse.Namespace, profile: HardwareProfile | None = None) -> int:
    """Exit 0 only when every file is complete and verified; the local path is printed last.

    Args:
        args: the parsed `tailor pull` arguments.
        profile: the machine the plan picks a file for (tests); default: this one.
    """
    downloader = None
    try:
        client = HubClient()
        details = client.repo_details(args.repo, args.revision)
        paths = _choose(client, details, args, profile)
        downloader = Downloader(on_event=TerminalProgress(sys.stderr))
        downloader.clean_stale_partials()  # a week old: abandoned, by us or another tool
        local = _fetch(client, downloader, details, paths, args.revision)
        suggestion = draft_for(args.repo) if local.suffix.lower() == ".gguf" else None
        if suggestion is not None and args.with_draft:
            draft = client.repo_details(suggestion.repo)
            print(_fetch(client, downloader, draft, _draft_files(draft, suggestion), "main"))
        elif suggestion is not None:
            _suggest(suggestion, local)
    except (HubError, DownloadError, PullError, InvalidModelFile, ValueError) as exc:
        print(f"tailor: error: {getattr(exc, 'message', None) or exc}", file=sys.stderr)
        return 1
    finally:
        if downloader is not None:
            downloader.close()
    print(local)
    return 0


def _fetch(client: HubClient, downloader: Downloader, details: RepoDetails, paths: tuple[str, ...],
           revision: str) -> Path:
    """Download `paths` of a repo, verified; the local path of the first."""
    snapshot = downloader.download(build_request(client, details, paths, revision), client.auth_headers())
    return snapshot / paths[0]


def _draft_files(details: RepoDetails, suggestion: DraftSuggestion) -> tuple[str, ...]:
    """The draft repo's file at the suggested level, else its smallest GGUF."""
    ggufs = [g for g in group_files(details.files) if g.complete and g.format == "gguf"]
    if not ggufs:
        raise PullError(f"{details.id} (the suggested draft) has no GGUF file")
    chosen = next((g for g in ggufs if (g.quant or "").upper() == suggestion.quant), None)
    return (chosen or min(ggufs, key=lambda g: g.total_size)).paths


def _suggest(suggestion: DraftSuggestion, model: Path) -> None:
    """Say which draft would speed this model up, or that the library has one Auto will use."""
    have = library_drafts(AppPaths.default().data_dir).find(str(model))
    if have is not None:
        print(f"tailor: speculative decoding: Auto drafts for it with {have.name} from your library", file=sys.stderr)
        return
    print(f"tailor: {suggestion.repo} ({suggestion.family}, the same tokenizer) can draft for it and speed up its "
          f"replies (speculative decoding): tailor pull {suggestion.repo} --quant {suggestion.quant}, or pull with "
          "--with-draft", file=sys.stderr)


def _choose(client: HubClient, details: RepoDetails, args: argparse.Namespace,
            profile: HardwareProfile | None) -> tuple[str, ...]:
    groups = [g for g in group_files(details.files) if g.complete]
    if args.file:
        for g in groups:
            if any(p == args.file or PurePosixPath(p).name == args.file for p in g.paths):
                return with_extras(details, g)
        raise PullError(f"{args.repo} has no file {args.file}")
    if args.quant:
        for g in groups:
            if g.format == "gguf" and (g.quant or "").upper() == args.quant.upper():
                return g.paths
        levels = ", ".join(g.quant for g in groups if g.format == "gguf" and g.quant) or "none"
        raise PullError(f"{args.repo} has no {args.quant.upper()} file (levels: {levels})")
    torch_ok = torch_available()
    candidates = repo_candidates(client, args.repo, details.sha)
    if not candidates:
        raise PullError(f"{args.repo} has no GGUF, AWQ, GPTQ or FP8 model files")
    machine = Machine.from_profile(profile or detect_machine())
    plan = make_plan(machine, candidates, context=args.ctx, torch_ok=torch_ok)
    print(f"Plan: {plan.quant or plan.format} — {plan.reasons[-1]}", file=sys.stderr)
    group = next((g for g in groups if g.paths == plan.files), None)
    if group is None:
        return plan.files
    chosen = [c for c in candidates if c.files == plan.files]
    fits = projector_fit(machine, lambda m: make_plan(m, chosen, context=args.ctx, torch_ok=torch_ok), plan)
    return with_extras(details, group, projector_for(details, group, fits) if group.format == "gguf" else None)


class TerminalProgress:
    """A one-line progress bar on a terminal; silent when the stream is not one."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._tty = stream.isatty()
        self._note: str | None = None

    def __call__(self, event: object) -> None:
        if isinstance(event, Progress) and event.note and event.note != self._note:
            # Said once on any stream: e.g. the window downloads the same file, and this pull waits.
            self._note = event.note
            start = "\n" if self._tty else ""  # below the progress bar's line
            self._stream.write(f"{start}tailor: {event.path_in_repo}: {event.note}\n")
            self._stream.flush()
            return
        if not self._tty or not isinstance(event, Progress) or not event.total:
            return
        mib = 1024 * 1024
        eta = f"{event.eta_s:4.0f}s" if event.eta_s is not None else "   ?"
        line = (
            f"\r{event.done / event.total:6.1%}  {event.done / mib:8.1f} / {event.total / mib:.1f} MiB  "
            f"{event.speed_bps / mib:6.1f} MiB/s  ETA {eta}"
        )
        self._stream.write(line + ("\n" if event.done >= event.total else ""))
        self._stream.flush()

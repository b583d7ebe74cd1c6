"""`tailor ls [--json]` and `tailor rm MODEL [--yes]`: the local library from the command line. No Qt."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.services.paths import AppPaths
from models.library import ImportedModel, Library, LocalFile, LocalRepo, LocalRevision, ModelStore, StoreError
from models.units import human_size


def add_library_parsers(subparsers: Any) -> None:
    """Add `ls` and `rm` to `parser.add_subparsers()`; they run `run_ls` / `run_rm` (exit status)."""
    ls = subparsers.add_parser("ls", help="list the local models (Hugging Face cache and imported files)")
    ls.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ls.set_defaults(func=run_ls)
    rm = subparsers.add_parser("rm", help="delete a local model (an imported file is only forgotten)")
    rm.add_argument("model", metavar="MODEL", help="a repo id (org/name) or a file path")
    rm.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    rm.set_defaults(func=run_rm)


def _store() -> ModelStore:
    return ModelStore(AppPaths.default().data_dir)


def run_ls(args: argparse.Namespace, store: ModelStore | None = None) -> int:
    library = (store or _store()).list()
    if getattr(args, "json", False):
        print(json.dumps(library_to_dict(library)))
    else:
        print(format_library(library))
    return 0


def run_rm(args: argparse.Namespace, store: ModelStore | None = None) -> int:
    store = store or _store()
    try:
        item = store.find(args.model)
    except StoreError as exc:
        print(f"tailor: error: {exc}", file=sys.stderr)
        return 1
    what = describe(item)
    if not args.yes:
        print(f"Delete {what}? [y/N] ", end="", flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("Nothing deleted.")
            return 1
    try:
        store.delete(item)
    except (OSError, StoreError) as exc:
        print(f"tailor: error: cannot delete {what}: {exc}", file=sys.stderr)
        return 1
    print(f"Forgot {what} (the file stays on disk)" if isinstance(item, ImportedModel) else f"Deleted {what}")
    return 0


def describe(item: LocalRepo | LocalRevision | LocalFile | ImportedModel) -> str:
    if isinstance(item, LocalRepo):
        return f"{item.repo_id} ({human_size(item.size)})"
    if isinstance(item, LocalRevision):
        return f"{item.repo_id}@{item.commit[:8]} ({human_size(item.size)})"
    if isinstance(item, LocalFile):
        return f"{item.repo_id}/{item.path_in_repo} ({human_size(item.size)})"
    return f"imported file {item.path} ({human_size(item.size)})"


def library_to_dict(library: Library) -> dict:
    return {
        "total_size": library.total_size,
        "repos": [
            {
                "repo_id": repo.repo_id,
                "size": repo.size,
                "complete": repo.complete,
                "path": str(repo.repo_dir),
                "revisions": [
                    {
                        "commit": rev.commit,
                        "refs": list(rev.refs),
                        "complete": rev.complete,
                        "path": str(rev.snapshot_dir),
                        "files": [{"name": f.path_in_repo, "size": f.size, "gguf": f.is_gguf, "path": str(f.path)}
                                  for f in rev.files],
                    }
                    for rev in repo.revisions
                ],
            }
            for repo in library.repos
        ],
        "imported": [{"path": str(m.path), "size": m.size, "exists": m.exists} for m in library.imported],
    }


def format_library(library: Library) -> str:
    if not library.repos and not library.imported:
        return "No local models."
    lines = []
    for repo in library.repos:
        status = "" if repo.complete else "  (download incomplete)"
        lines.append(f"{repo.repo_id}  {human_size(repo.size)}{status}")
        for rev in repo.revisions:
            refs = f" ({', '.join(rev.refs)})" if rev.refs else ""
            for f in rev.files:
                if f.is_gguf or len(rev.files) <= 3:
                    lines.append(f"  {f.path_in_repo}  {human_size(f.size)}  @{rev.commit[:8]}{refs}")
    for model in library.imported:
        lines.append(f"{model.path}  {human_size(model.size)}  (imported{'' if model.exists else ', missing'})")
    lines.append(f"Total: {human_size(library.total_size)}")
    return "\n".join(lines)



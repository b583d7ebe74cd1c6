"""`tailor plan`: which quantization of a model fits this machine (or another), and why."""

from __future__ import annotations

import argparse
import importlib.util
import json
from typing import Any

from app.cli.errors import CliError
from app.services.planning.machine import detect_machine
from app.services.planning.plan_text import format_plan
from models.formats.errors import InvalidModelFile
from models.hardware.profile import NvmlApi, profile_for
from models.hub.client import HubClient, HubError
from models.plan.candidates import Candidate
from models.plan.context import AUTO_CONTEXT_CAP
from models.plan.decision_tree import make_plan
from models.plan.folder_plan import folder_candidate, is_model_folder, plan_folder
from models.plan.machine import Machine
from models.plan.sources import gguf_file_candidate, repo_candidates

KV_TYPES = ("f16", "q8_0", "q4_0")


class PlanError(CliError):
    """A bad file, repo or option; printed as one line."""


def context_option(text: str) -> int | None:
    """`--ctx auto|N`: None for auto (the largest context that fits), else a positive number of tokens."""
    if text.strip().lower() == "auto":
        return None
    return _positive(text, "must be auto or a positive integer")


def _cap_option(text: str) -> int:
    return _positive(text, "must be a positive integer")


def _positive(text: str, what: str) -> int:
    """`text` as a positive integer, else argparse's error: `what`, then the text given."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{what}, not {text}")
    return value


def add_plan_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("plan", help="which quantization fits this machine, with the reasons")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--file",
        help="a GGUF file, local path or http(s) URL (only the header is read), or a Hugging Face model folder",
    )
    source.add_argument("--repo", help="a Hugging Face repo id (HF_ENDPOINT selects the hub); one header is read")
    parser.add_argument("--revision", default="main", help="the repo's branch, tag or commit (%(default)s)")
    parser.add_argument(
        "--ctx", type=context_option, metavar="auto|N",
        help="context length wanted, or auto: the largest that fits, up to --ctx-cap and the model's trained "
        "length (default: auto)",
    )
    parser.add_argument("--ctx-cap", type=_cap_option, metavar="N",
                        help=f"the most tokens --ctx auto picks (default: {AUTO_CONTEXT_CAP})")
    parser.add_argument("--kv", choices=KV_TYPES, default="f16", help="KV cache type (%(default)s)")
    parser.add_argument("--vram", type=float, help="plan for a GPU with this many GiB instead of this machine's")
    parser.add_argument("--gpu-name", help='the GPU to plan for, e.g. "RTX 4090"')
    parser.add_argument("--cc", help="its compute capability, e.g. 8.9")
    parser.add_argument("--ram", type=float, help="RAM in GiB to plan with")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    parser.set_defaults(func=run_plan)
    return parser


def run_plan(args: argparse.Namespace, nvml: NvmlApi | None = None) -> int:
    """Plan and print; `nvml` is the NVML to ask for this machine's GPUs (tests), default pynvml."""
    if args.ctx is not None and args.ctx_cap is not None:
        raise PlanError(f"--ctx-cap is the most tokens --ctx auto picks: it does nothing with --ctx {args.ctx}")
    cap = args.ctx_cap or AUTO_CONTEXT_CAP
    machine = Machine.from_profile(_profile(args, nvml))
    torch_ok = importlib.util.find_spec("torch") is not None
    if args.file and is_model_folder(args.file):  # one checkpoint, run by the PyTorch engine
        try:
            candidate = folder_candidate(args.file)
        except (InvalidModelFile, ValueError, OSError) as exc:
            raise PlanError(str(exc)) from None
        plan = plan_folder(machine, candidate, context=args.ctx, torch_ok=torch_ok, auto_context_cap=cap)
        print(json.dumps(plan.to_dict()) if args.json else format_plan(plan))
        return 0
    candidates = _candidates(args)
    plan = make_plan(machine, candidates, context=args.ctx, kv_type=args.kv, torch_ok=torch_ok,
                     auto_context_cap=cap)
    print(json.dumps(plan.to_dict()) if args.json else format_plan(plan))
    return 0


def _profile(args: argparse.Namespace, nvml: NvmlApi | None):  # noqa: ANN202 - models.hardware.profile.HardwareProfile
    if args.vram is None and args.gpu_name is None and args.cc is None and args.ram is None:
        return detect_machine(nvml)
    try:
        return profile_for(gpu_name=args.gpu_name, vram_gib=args.vram, cc=args.cc, ram_gib=args.ram)
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def _candidates(args: argparse.Namespace) -> list[Candidate]:
    if args.repo:
        return _repo_candidates(args.repo, getattr(args, "revision", None) or "main")
    try:
        return [gguf_file_candidate(args.file)]
    except (InvalidModelFile, ValueError, OSError) as exc:
        raise PlanError(str(exc)) from None


def _repo_candidates(repo_id: str, revision: str) -> list[Candidate]:
    try:
        candidates = repo_candidates(HubClient(), repo_id, revision)
    except HubError as exc:
        raise PlanError(exc.message) from None
    except (InvalidModelFile, ValueError, OSError) as exc:
        raise PlanError(f"{repo_id}: {exc}") from None
    if not candidates:
        raise PlanError(f"{repo_id}: no GGUF file or AWQ/GPTQ/FP8 checkpoint to plan for")
    return candidates

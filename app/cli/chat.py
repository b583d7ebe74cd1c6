"""`tailor chat`: load a model in the engine process and stream one reply to stdout (or ask a remote
server with --endpoint). Ctrl+C stops the reply and keeps its text."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.chat.engine_history import step_messages
from app.cli.chat_documents import MessageDocuments, add_document_arguments
from app.cli.chat_media import add_media_arguments, message_media
from app.cli.chat_tools import CliTools, add_tool_arguments
from app.cli.errors import CliError
from app.cli.mem import final_report, memory_json
from app.cli.plan import context_option
from app.cli.preset import PresetError, apply_chat_preset
from app.cli.projector_option import add_projector_argument, chosen_projector
from app.cli.reply_options import add_reply_arguments, reply_shape
from app.cli.reply_output import write_token
from app.services.chat_defaults import (
    DEFAULT_AUTO_CTX_CAP,
    DEFAULT_MAX_TOKENS,
    DEFAULT_SYSTEM_PROMPT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
)
from app.services.history.store import StoreError
from app.services.load_settings import LoadSettings
from app.services.log_setup import configure_logging
from app.services.paths import AppPaths
from app.services.planning.draft_finder import library_drafts
from app.services.planning.load_planner import LoadPlanner
from engine.client import EngineClient, EngineNotRunning
from engine.protocol import (
    ChatMessage,
    Done,
    Error,
    Loaded,
    ModelInfo,
    ReplyShape,
    SamplingParams,
    Token,
)
from engine.starter import StarterModelMissing, starter_model_path
from models.plan.decision_tree import Plan
from models.plan.load_options import SPECULATIVE_MODES, SpeculativeOptions, TorchOptions

# After Ctrl+C stops a reply, how long the engine has to end it before the command gives up on it.
CANCEL_GRACE_S = 3.0


def add_chat_parser(subparsers: Any) -> None:
    chat = subparsers.add_parser("chat", help="stream one reply to stdout")
    chat.add_argument("prompt", help="the user message")
    chat.add_argument(
        "--model", type=Path,
        help="GGUF file, or a Hugging Face model folder (safetensors, AWQ) for the PyTorch engine "
        "(default: the built-in starter model)",
    )
    chat.add_argument(
        "--system", default=DEFAULT_SYSTEM_PROMPT, help='system prompt (default: a short helpful one; "" for none)'
    )
    chat.add_argument(
        "--ctx", type=context_option, metavar="auto|N",
        help="context length in tokens, or auto: the largest that fits this machine, up to --ctx-cap and the "
        "model's trained length (default: auto)",
    )
    chat.add_argument(
        "--ctx-cap", type=_positive_int, metavar="N",
        help=f"the most tokens --ctx auto picks (default: {DEFAULT_AUTO_CTX_CAP})",
    )
    chat.add_argument(
        "--max-tokens", type=_positive_int, default=DEFAULT_MAX_TOKENS, help="most tokens to generate (%(default)s)"
    )
    chat.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE, help="sampling temperature (%(default)s)")
    chat.add_argument("--top-p", type=float, default=DEFAULT_TOP_P, help="nucleus sampling (%(default)s)")
    chat.add_argument("--seed", type=int, help="sampling seed, for repeatable replies")
    chat.add_argument("--kv", choices=("f16", "q8_0", "q4_0"), default="f16", help="KV cache type (%(default)s)")
    chat.add_argument(
        "--flash-attn", choices=("on", "off", "auto"), default="auto",
        help="flash attention (%(default)s; a quantized KV cache needs it on)",
    )
    chat.add_argument(
        "--speculative", choices=SPECULATIVE_MODES,
        help="speculative decoding: auto (the default: draft when --draft is given, else the engine's choice), "
        "off, lookup (prompt lookup: drafts from the conversation itself, for a GGUF file and a model folder), "
        "or draft (a --draft model)",
    )
    chat.add_argument(
        "--draft", type=Path, metavar="PATH",
        help="the draft model, with the model's tokenizer: a folder for a model folder (PyTorch engine), "
        "a .gguf file for a GGUF model",
    )
    add_media_arguments(chat)
    add_document_arguments(chat)
    add_projector_argument(chat)
    chat.add_argument(
        "--gpu-memory-fraction", type=_fraction, default=0.9, metavar="F",
        help="PyTorch engine: share of the GPU memory left after the weights for the KV cache (%(default)s)",
    )
    add_reply_arguments(chat)
    add_tool_arguments(chat)
    chat.add_argument("--json", action="store_true", help="after the reply, print one line of JSON stats")
    chat.add_argument(
        "--preset", help="take the system prompt and sampling from this preset (options you give win)"
    )
    chat.add_argument(
        "--endpoint", metavar="URL",
        help="chat with a remote OpenAI-compatible server (vLLM, TGI, Ollama, tailor serve); --model names its model",
    )
    chat.add_argument("--api-key", help="with --endpoint: the server's API key (default: the saved endpoint's)")
    chat.add_argument(
        "--mem", action="store_true", help="with --json: then one more line, the memory report and its forecast"
    )
    chat.set_defaults(func=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    """Load the model in the engine process, stream the reply to stdout."""
    if getattr(args, "endpoint", None):
        if args.image or args.audio or args.mmproj:
            raise CliError("--image, --audio and --mmproj are for a model this machine loads, not for --endpoint's "
                           "server")
        if args.file or args.knowledge:
            raise CliError("--file and --knowledge are for a model this machine loads (its tokenizer says what "
                           "fits), not for --endpoint's server")
        from app.cli.remote_chat import run_remote_chat

        return run_remote_chat(args)
    _check_options(args)
    try:
        model = args.model or starter_model_path()
    except StarterModelMissing as exc:
        raise CliError(str(exc)) from None
    shape = reply_shape(args, CliError)
    messages = []
    if args.system:
        messages.append(ChatMessage("system", args.system))
    mmproj = chosen_projector(args, Path(model))
    messages.append(ChatMessage("user", args.prompt, media=message_media(args, Path(model), mmproj)))
    sampling = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed
    )
    paths = AppPaths.default()
    documents = MessageDocuments.read(args, paths.data_dir)  # refused files are one line before any load
    configure_logging(paths.app_log)
    client = EngineClient(log_path=paths.engine_log)
    try:
        client.start()
        # GPU layers, KV type and flash attention as the decision tree plans them for this machine.
        planner = LoadPlanner(prefix_cache_dir=paths.prefix_cache, drafts=library_drafts(paths.data_dir))
        planned = planner.plan_load(str(model), replace(_load_settings(args), mmproj=mmproj))
        if planned.refusal is not None:
            raise CliError(planned.refusal)
        client.load(planned.request)
        info = _wait_loaded(client)
        print(f"tailor: {_loaded_line(info, args.ctx is None, planned.plan)}", file=sys.stderr)
        if documents is not None:
            messages = documents.into(messages, client, info.n_ctx, args.max_tokens)
        with CliTools.opened(args, paths, info, CliError) as tools:
            done = _reply(client, messages, sampling, tools.shaped(shape) if tools else shape, tools)
        memory = final_report(client) if args.mem else None
    except EngineNotRunning as exc:
        raise CliError(str(exc)) from None
    finally:
        client.shutdown()
        if documents is not None:
            documents.close()
    sys.stdout.write("\n")
    if args.json:
        sys.stdout.write(json.dumps(done.stats.as_dict()) + "\n")
        if memory is not None:
            forecast = planned.plan.forecast.to_dict() if planned.plan and planned.plan.forecast else None
            sys.stdout.write(json.dumps(memory_json(memory, forecast)) + "\n")
    sys.stdout.flush()
    return 130 if done.finish_reason == "cancelled" else 0


def _reply(client: EngineClient, messages: list[ChatMessage], sampling: SamplingParams, shape: ReplyShape,
           tools: CliTools | None) -> Done:
    """Stream the reply; with tools, each request that ends with calls runs them and asks again, with their
    results, until the model answers without calls or the step cap (tools.run_step) comes."""
    while True:
        request_id = client.generate(messages, sampling, shape=shape)
        previous = signal.getsignal(signal.SIGINT)
        interrupts = _ReplyInterrupts(client, request_id)
        signal.signal(signal.SIGINT, interrupts)
        try:
            done = _stream(client, request_id, interrupts)
        finally:
            signal.signal(signal.SIGINT, previous)
        if tools is None or not tools.takes(done):
            return done
        step = tools.run_step(done)
        if step is None:  # the cap
            return done
        messages = [*messages, *step_messages(step)]
        shape = replace(shape, tool_choice="auto")


def _check_options(args: argparse.Namespace) -> None:
    """Refuse options that contradict each other (CliError), and apply --preset to the rest."""
    if args.mem and not args.json:
        raise CliError("--mem adds a line to --json's output: use both")
    if not args.mcp and (args.allow or args.allow_all or args.tool_choice != "auto"):
        raise CliError("--allow, --allow-all and --tool-choice are for the tools of --mcp servers: add --mcp NAME")
    if args.tool_steps < 1:
        raise CliError(f"--tool-steps must be 1 or more, not {args.tool_steps}")
    if args.preset:
        try:
            apply_chat_preset(args)
        except (PresetError, StoreError) as exc:
            raise CliError(str(exc)) from None
    if args.speculative == "draft" and args.draft is None:
        raise CliError("--speculative draft needs --draft DIR (a draft model folder) or FILE (a .gguf draft)")
    if args.draft is not None and args.speculative not in (None, "auto", "draft"):
        raise CliError(f"--draft needs --speculative draft (or auto, or no --speculative), not {args.speculative}")
    if args.ctx is not None and args.ctx_cap is not None:
        raise CliError(f"--ctx-cap is the most tokens --ctx auto picks: it does nothing with --ctx {args.ctx}")


def _load_settings(args: argparse.Namespace) -> LoadSettings:
    """What the options ask of the load: context, KV cache, flash attention, speculation, the PyTorch engine's."""
    speculation = SpeculativeOptions(mode=args.speculative or "auto", draft_path=str(args.draft) if args.draft else None)
    return LoadSettings(n_ctx=args.ctx, kv_type=args.kv, flash_attn=args.flash_attn, speculation=speculation,
                        torch=TorchOptions(gpu_memory_fraction=args.gpu_memory_fraction),
                        auto_ctx_cap=args.ctx_cap or DEFAULT_AUTO_CTX_CAP)


def _wait_loaded(client: EngineClient) -> ModelInfo:
    while True:
        event = client.next_event()
        if isinstance(event, Loaded):
            if event.info.notice:
                print(f"tailor: {event.info.notice}", file=sys.stderr)
            return event.info
        if isinstance(event, Error):
            raise CliError(event.message)


def _loaded_line(info: ModelInfo, auto: bool, plan: Plan | None) -> str:
    """The startup line: the model and the context it was loaded with (the engine's figure), and why."""
    line = f"loaded {info.name} with {info.n_ctx:,} tokens of context"
    if info.projector:
        senses = " and ".join(s for s, has in (("seeing", info.vision), ("hearing", info.audio)) if has)
        line += f", {senses} through {Path(info.projector).name}" if senses else f", with {Path(info.projector).name}"
    if not auto:
        return line
    if plan is None:
        return f"{line} (auto: the default, as the model could not be planned)"
    if info.n_ctx == info.n_ctx_train:
        return f"{line} (auto: the model's trained length)"
    if not plan.fits:
        return f"{line} (auto: the least it takes, though the plan says the model does not fit)"
    if plan.max_context > info.n_ctx:
        return f"{line} (auto: the cap; {plan.max_context:,} would fit, see --ctx-cap)"
    return f"{line} (auto: the most that fits)"


class _ReplyInterrupts:
    """Ctrl+C while a reply streams: the first stops the reply (its text stays, exit 130); a second, or
    an engine silent for CANCEL_GRACE_S since (hung, or stopped by a debugger), interrupts.

    Silent, not slow: the tokens it made before it saw the cancel still arrive, and a busy machine
    can take seconds to deliver them; an engine that answers is alive and about to stop.
    """

    def __init__(self, client: EngineClient, request_id: int):
        self.client, self.request_id = client, request_id
        self.cancelled_at: float | None = None

    def __call__(self, _signum: int, _frame: object) -> None:
        if self.cancelled_at is not None:
            raise KeyboardInterrupt
        self.cancelled_at = time.monotonic()
        self.client.cancel(self.request_id)

    def heard(self) -> None:
        """The reply sent a token: after a cancel, the grace starts again."""
        if self.cancelled_at is not None:
            self.cancelled_at = time.monotonic()

    def overdue(self) -> bool:
        return self.cancelled_at is not None and time.monotonic() - self.cancelled_at > CANCEL_GRACE_S


def _stream(client: EngineClient, request_id: int, interrupts: _ReplyInterrupts) -> Done:
    while True:
        if interrupts.overdue():
            raise KeyboardInterrupt
        event = client.next_event(timeout=0.1)
        if event is None or getattr(event, "request_id", request_id) not in (request_id, None):
            continue
        if isinstance(event, Token):
            interrupts.heard()  # the reply's own loop is alive (memory reports come from another thread)
            write_token(event)
        elif isinstance(event, Done):
            return event
        elif isinstance(event, Error):
            raise CliError(event.message)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, not {text}")
    return value

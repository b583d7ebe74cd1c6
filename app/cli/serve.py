"""`tailor serve`: serve a model over an OpenAI-compatible HTTP API (loopback by default)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from app.cli.projector_option import add_projector_argument, chosen_projector
from app.server.config import (
    DEFAULT_PORT,
    DEFAULT_QUEUE_TIMEOUT_S,
    OLLAMA_PORT,
    ServerConfig,
    ServerConfigError,
)
from app.server.library_pool import library_pool
from app.server.model_pool import DEFAULT_TTL_S
from app.server.own_engine import ModelLoadError
from app.server.runner import ServerStartError, serve_forever
from app.services.chat_defaults import DEFAULT_N_CTX
from app.services.load_settings import LoadSettings
from app.services.log_setup import configure_logging
from app.services.paths import AppPaths
from engine.protocol import DEFAULT_PARALLEL, MAX_PARALLEL
from engine.starter import StarterModelMissing, starter_model_path


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="serve the models of your library over OpenAI-compatible APIs "
                                          "(127.0.0.1 by default)")
    serve.add_argument(
        "--model", type=Path,
        help="the model loaded at start and answering requests that name none: a GGUF file, or a Hugging Face "
        "model folder (safetensors, AWQ) for the PyTorch engine (default: the built-in starter model); requests "
        "may name any model of the library (GET /v1/models), loaded on demand",
    )
    serve.add_argument(
        "--ttl", type=float, default=DEFAULT_TTL_S, metavar="S",
        help="seconds an idle model stays loaded (%(default)s; 0: unloaded after each reply; -1: never); "
        "the model of --model stays until the server stops",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port; 0 picks a free one (%(default)s)")
    serve.add_argument(
        "--ollama-port", type=int, metavar="PORT",
        help=f"also listen on PORT for apps that look for Ollama ({OLLAMA_PORT} is Ollama's; the same API is on "
        "--port too); off by default",
    )
    serve.add_argument(
        "--api-key",
        help="require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every request (matched as UTF-8; "
        "printable ASCII is what every client can send)",
    )
    serve.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN",
        help="let browser pages from ORIGIN call the API (CORS; repeatable; off by default)",
    )
    serve.add_argument(
        "--allow-remote", action="store_true",
        help="allow a non-loopback --host (other machines can reach the model; needs --api-key)",
    )
    serve.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="another name clients reach this server by (checked against the Host header; repeatable)",
    )
    serve.add_argument(
        "--allow-image-urls", action="store_true",
        help="fetch images that requests name by http(s) URL (off: only inline data: URLs; on, the server "
        "fetches any address a request names, up to 50 MB and 60 s each)",
    )
    serve.add_argument("--ctx", type=int, default=DEFAULT_N_CTX, help="context length in tokens (%(default)s)")
    serve.add_argument(
        "--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N",
        help=f"replies at once, batched on the one model and sharing its KV cache (1 to {MAX_PARALLEL}; "
        "%(default)s); more requests queue",
    )
    serve.add_argument(
        "--queue-timeout", type=float, default=DEFAULT_QUEUE_TIMEOUT_S, metavar="S",
        help="a queued request gets a 503 after waiting this many seconds (%(default)s)",
    )
    serve.add_argument("--kv", choices=("f16", "q8_0", "q4_0"), default="f16", help="KV cache type (%(default)s)")
    serve.add_argument("--flash-attn", choices=("on", "off", "auto"), default="auto", help="flash attention (%(default)s)")
    add_projector_argument(serve)
    serve.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    config = ServerConfig(
        host=args.host, port=args.port, api_key=args.api_key, allow_origins=tuple(args.allow_origin),
        allow_remote=args.allow_remote, allow_hosts=tuple(args.allow_host),
        parallel=args.parallel, queue_timeout_s=args.queue_timeout, allow_image_urls=args.allow_image_urls,
        ollama_port=args.ollama_port,
    )
    try:
        config.check()
        if args.ctx <= 0:
            raise ServerConfigError(f"--ctx must be a positive number of tokens, not {args.ctx}.")
        model = args.model or starter_model_path()
    except (ServerConfigError, StarterModelMissing) as exc:
        return _fail(str(exc))
    paths = AppPaths.default()
    configure_logging(paths.app_log)
    model = Path(model).expanduser().absolute()  # not resolved: the library lists its files by their snapshot path
    base = LoadSettings(n_ctx=args.ctx, kv_type=args.kv, flash_attn=args.flash_attn, n_parallel=args.parallel)
    pool = library_pool(paths, base, [str(model)], args.ttl, args.queue_timeout, args.parallel,
                        overrides={str(model): replace(base, mmproj=chosen_projector(args, model))})
    try:
        info = pool.preload(str(model))
        sees = f", seeing images through {Path(info.projector).name}" if info.projector else ""
        shared = (f"an embedding model: inputs of up to {info.n_ctx} tokens, POST /v1/embeddings" if info.embeddings
                  else f"context {info.n_ctx}, shared by up to {args.parallel} replies at once")
        print(f"tailor: loaded {info.name} ({shared}{sees})", file=sys.stderr)
        others = len(pool.catalog.entries()) - 1
        if others > 0:
            print(f"tailor: {others} more model{'s' if others > 1 else ''} of the library load when a request names "
                  "them (GET /v1/models)", file=sys.stderr)

        def ready(url: str) -> None:
            print(f"tailor: serving on {url} (Ctrl+C to stop)", file=sys.stderr, flush=True)

        def ollama_ready(url: str) -> None:
            print(f"tailor: serving Ollama's API on {url} too", file=sys.stderr, flush=True)

        serve_forever(None, None, config, on_ready=ready, on_ollama_ready=ollama_ready, router=pool)
    except (ModelLoadError, ServerStartError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        pass
    finally:
        pool.shutdown()
    return 0


def _fail(message: str) -> int:
    print(f"tailor: error: {message}", file=sys.stderr)
    return 1

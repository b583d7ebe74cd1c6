"""`tailor chat --endpoint URL --model NAME`: one reply from a remote OpenAI-compatible server."""

from __future__ import annotations

import argparse
import json
import signal
import sys

from app.cli.reply_output import write_token
from app.remote.endpoints import EndpointStore
from app.remote.openai_client import RemoteChat, RemoteEndpoint, RemoteError, normalize_url
from app.remote.remote_engine import RemoteEngine
from engine.protocol import ChatMessage, Done, Error, SamplingParams, Token


def run_remote_chat(args: argparse.Namespace) -> int:
    """Stream the reply as the local engine's is (the answer to stdout, its reasoning to stderr); errors are
    one line on stderr and exit code 1."""
    try:
        url = normalize_url(args.endpoint)
        key = args.api_key or EndpointStore().key_for_url(url)
        model = str(args.model) if args.model else _only_model(url, key)
    except RemoteError as exc:
        return _fail(str(exc))
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt))
    sampling = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed
    )
    engine = RemoteEngine(RemoteEndpoint(url, model, key))
    engine.start()
    request_id = engine.generate(messages, sampling)
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda *_: engine.cancel(request_id))
    done = None
    try:
        for event in engine.stream(request_id):
            if isinstance(event, Token):
                write_token(event)
            elif isinstance(event, Done):
                done = event
            elif isinstance(event, Error):
                sys.stdout.write("\n")
                return _fail(event.message)
    finally:
        signal.signal(signal.SIGINT, previous)
        engine.shutdown()
    sys.stdout.write("\n")
    if args.json and done is not None:
        sys.stdout.write(json.dumps(done.stats.as_dict()) + "\n")
    sys.stdout.flush()
    return 130 if done is not None and done.finish_reason == "cancelled" else 0


def _only_model(url: str, key: str | None) -> str:
    """The model to ask for when none was named: the server's only one."""
    chat = RemoteChat(RemoteEndpoint(url, "", key))
    try:
        models = chat.models()
    finally:
        chat.close()
    if len(models) != 1:
        listed = ", ".join(models[:8]) + (f" and {len(models) - 8} more" if len(models) > 8 else "") or "none"
        raise RemoteError(f"Name the model with --model; {url} lists: {listed}.")
    return models[0]


def _fail(message: str) -> int:
    print(f"tailor: error: {message}", file=sys.stderr)
    return 1

"""Every API's stream against the chat API's: decode tok/s a streaming HTTP client sees.

Side by side on the starter model, on one server and engine, greedy, the same prompt, 120 tokens: OpenAI's
/v1/chat/completions (the reference), /v1/responses, Anthropic's /v1/messages and Ollama's /api/chat, in
an order that rotates each round so no API always follows the same one. tok/s from the first to the last
text delta, with the token count from each API's own usage figures. Median of each; target: within 2 % of
the chat API's.

    python -m tests.bench.server_apis
"""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from app.server.config import ServerConfig
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from engine.starter import starter_model_path

RUNS = 5
MAX_TOKENS = 120
PROMPT = "Write a long story about a dragon who learns to bake bread."
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def sse(http: httpx.Client, url: str, body: dict) -> Iterator[dict]:
    with http.stream("POST", url, json=body, timeout=120) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                yield json.loads(line[6:])


def chat(http: httpx.Client, root: str, model: str) -> tuple[list[float], int]:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    times, tokens = [], 0
    for event in sse(http, f"{root}/v1/chat/completions", body):
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        if event["choices"] and event["choices"][0]["delta"].get("content"):
            times.append(time.perf_counter())
    return times, tokens


def responses(http: httpx.Client, root: str, model: str) -> tuple[list[float], int]:
    body = {"model": model, "input": PROMPT, "max_output_tokens": MAX_TOKENS, "temperature": 0, "stream": True,
            "store": False}
    times, tokens = [], 0
    for event in sse(http, f"{root}/v1/responses", body):
        if event["type"] == "response.output_text.delta":
            times.append(time.perf_counter())
        elif event["type"] in ("response.completed", "response.incomplete"):
            tokens = event["response"]["usage"]["output_tokens"]
    return times, tokens


def messages(http: httpx.Client, root: str, model: str) -> tuple[list[float], int]:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True}
    times, tokens = [], 0
    for event in sse(http, f"{root}/v1/messages", body):
        if event["type"] == "content_block_delta" and event["delta"].get("type") == "text_delta":
            times.append(time.perf_counter())
        elif event["type"] == "message_delta":
            tokens = event["usage"]["output_tokens"]
    return times, tokens


def ollama(http: httpx.Client, root: str, model: str) -> tuple[list[float], int]:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "options": {"temperature": 0, "num_predict": MAX_TOKENS}}
    times, tokens = [], 0
    with http.stream("POST", f"{root}/api/chat", json=body, timeout=120) as response:
        for line in response.iter_lines():
            event = json.loads(line)
            if event.get("message", {}).get("content"):
                times.append(time.perf_counter())
            if event.get("done"):
                tokens = event["eval_count"]
    return times, tokens


APIS: dict[str, Callable[[httpx.Client, str, str], tuple[list[float], int]]] = {
    "/v1/chat/completions": chat, "/v1/responses": responses, "/v1/messages": messages, "/api/chat": ollama}


def rate(times: list[float], tokens: int) -> float:
    """Tokens per second between the first and the last text delta (the first token's time is TTFT's)."""
    return (tokens - 1) / (times[-1] - times[0])


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        engine = OwnEngine(log_path=Path(home) / "engine.log")
        info = engine.load(starter_model_path(), LoadSettings(n_ctx=2048))
        server = ServerThread(engine.client, engine.model_info, ServerConfig(port=0)).start()
        root = server.url.removesuffix("/v1")
        model = Path(info.path).stem
        http = httpx.Client(transport=httpx.HTTPTransport(socket_options=NODELAY))
        names = list(APIS)
        try:
            for run in APIS.values():  # warm: the prompt's prefix is cached for each template path
                run(http, root, model)
            rates: dict[str, list[float]] = {name: [] for name in names}
            for i in range(RUNS):
                for name in names[i % len(names):] + names[: i % len(names)]:
                    times, tokens = APIS[name](http, root, model)
                    rates[name].append(rate(times, tokens))
                    print(f"  round {i + 1}: {name:21} {rates[name][-1]:6.1f} tok/s ({tokens} tokens)", flush=True)
            reference = statistics.median(rates[names[0]])
            print(f"decode streamed, medians of {RUNS} (target: within 2 % of {names[0]}'s {reference:.1f} tok/s):")
            for name in names[1:]:
                median = statistics.median(rates[name])
                print(f"  {name:21} {median:6.1f} tok/s  {median / reference - 1:+.1%}")
        finally:
            http.close()
            server.stop()
            engine.shutdown()


if __name__ == "__main__":
    main()

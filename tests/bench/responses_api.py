"""The Responses API's stream against the chat API's: decode tok/s a streaming HTTP client sees.

Side by side on the starter model, on one server and engine, greedy, the same prompt, 120 tokens,
alternating (chat, responses, responses, chat, ...): tok/s from the first to the last text delta,
with the token count from each API's usage. Median of each side; target: within 2 %.

    python -m tests.bench.responses_api
"""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.server.config import ServerConfig
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from engine.starter import starter_model_path

RUNS = 3
MAX_TOKENS = 120
PROMPT = "Write a long story about a dragon who learns to bake bread."
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def chat(http: httpx.Client, url: str, model: str) -> tuple[float, int]:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    first = last = 0.0
    tokens = 0
    with http.stream("POST", f"{url}/chat/completions", json=body, timeout=120) as response:
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
            if event["choices"] and event["choices"][0]["delta"].get("content"):
                last = time.perf_counter()
                first = first or last
    return (tokens - 1) / (last - first), tokens


def responses(http: httpx.Client, url: str, model: str) -> tuple[float, int]:
    body = {"model": model, "input": PROMPT, "max_output_tokens": MAX_TOKENS, "temperature": 0, "stream": True,
            "store": False}
    first = last = 0.0
    tokens = 0
    with http.stream("POST", f"{url}/responses", json=body, timeout=120) as response:
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if event["type"] == "response.output_text.delta":
                last = time.perf_counter()
                first = first or last
            elif event["type"] in ("response.completed", "response.incomplete"):
                tokens = event["response"]["usage"]["output_tokens"]
    return (tokens - 1) / (last - first), tokens


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        engine = OwnEngine(log_path=Path(home) / "engine.log")
        info = engine.load(starter_model_path(), LoadSettings(n_ctx=2048))
        server = ServerThread(engine.client, engine.model_info, ServerConfig(port=0)).start()
        model = Path(info.path).stem
        http = httpx.Client(transport=httpx.HTTPTransport(socket_options=NODELAY))
        try:
            chat(http, server.url, model)  # warm: the prompt's prefix is cached for both
            responses(http, server.url, model)
            rates: dict[str, list[float]] = {"chat": [], "responses": []}
            for i in range(RUNS):
                order = (chat, responses) if i % 2 == 0 else (responses, chat)
                for run in order:
                    rate, tokens = run(http, server.url, model)
                    rates[run.__name__].append(rate)
                    print(f"  run {i + 1}: {run.__name__:9} {rate:6.1f} tok/s ({tokens} tokens)", flush=True)
            a, b = statistics.median(rates["responses"]), statistics.median(rates["chat"])
            print(f"decode streamed: /v1/responses {a:.1f} tok/s, /v1/chat/completions {b:.1f} tok/s (medians of "
                  f"{RUNS}): {a / b - 1:+.1%} (target within 2 %)")
        finally:
            http.close()
            server.stop()
            engine.shutdown()


if __name__ == "__main__":
    main()

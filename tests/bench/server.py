"""Server overhead: decode tok/s streamed through `tailor serve`'s API vs `tailor chat`, and the TTFT it adds.

Side by side on the starter model, greedy, the same prompt (no system prompt), 120 tokens:
- decode: tok/s a streaming HTTP client sees (first to last content chunk) against what
  `tailor chat --json` reports, alternating (ABBA); ratio of medians (and of best runs), target >= 0.95;
- TTFT: request to first content chunk through the server, against the same engine driven
  directly through its EngineClient (same process, same warm prefix), alternating; the
  median of the paired differences is what the HTTP server adds, target <= 20 ms.

    python -m tests.bench.server
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from app.server.config import ServerConfig
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from engine.protocol import ChatMessage, Done, Error, Event, SamplingParams, Token
from engine.starter import starter_model_path

RUNS = 6
MAX_TOKENS = 120
N_CTX = 2048
PROMPT = "Write a long story about a dragon who learns to bake bread."
TTFT_RUNS = 16
# The client sends its request headers and body in two writes: with Nagle's algorithm on, the
# body waits for the server's delayed ACK (~40 ms), a cost of the client's socket, not the server.
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def through_server(http: httpx.Client, url: str, model: str, max_tokens: int = MAX_TOKENS) -> dict:
    """One streamed reply: TTFT and decode rate as the HTTP client sees them (one kept-alive client)."""
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = last = None
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
    return {"ttft_s": first - t0, "decode_tok_s": (tokens - 1) / (last - first) if tokens > 1 else 0.0,
            "gen_tokens": tokens}


def direct(engine: OwnEngine, max_tokens: int) -> dict:
    """The same request on the same engine through EngineClient, timed the same way."""
    ended = threading.Event()
    times: list[float] = []
    done: list[Done] = []

    def on_event(event: Event) -> None:
        if isinstance(event, Token):
            times.append(time.perf_counter())
        elif isinstance(event, Done | Error):
            if isinstance(event, Done):
                done.append(event)
            ended.set()

    t0 = time.perf_counter()
    engine.client.generate([ChatMessage("user", PROMPT)], SamplingParams(temperature=0.0, max_tokens=max_tokens),
                           on_event=on_event)
    ended.wait(120)
    return {"ttft_s": times[0] - t0, "gen_tokens": done[0].stats.gen_tokens}


def tailor_chat(home: str) -> dict:
    tailor = str(Path(sys.executable).with_name("tailor"))
    out = subprocess.run(
        [tailor, "chat", "--json", "--system", "", "--temperature", "0", "--ctx", str(N_CTX),
         "--max-tokens", str(MAX_TOKENS), PROMPT],
        capture_output=True, text=True, check=True, env={**os.environ, "TAILOR_HOME": home},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    # Separate homes: each engine keeps its own prefix cache folder.
    with tempfile.TemporaryDirectory() as server_home, tempfile.TemporaryDirectory() as home:
        os.environ["TAILOR_HOME"] = server_home
        engine = OwnEngine()
        info = engine.load(starter_model_path(), LoadSettings(n_ctx=N_CTX))
        server = ServerThread(engine.client, engine.model_info, ServerConfig(port=0)).start()
        model = Path(info.path).stem
        http = httpx.Client(transport=httpx.HTTPTransport(socket_options=NODELAY))
        try:
            through_server(http, server.url, model, 8)  # warm: the prompt's prefix is cached for both sides
            tailor_chat(home)
            served, chat = [], []
            for i in range(0 if "ttft" in sys.argv[1:] else RUNS):
                pair = (lambda: through_server(http, server.url, model), lambda: tailor_chat(home))
                a, b = (pair[0](), pair[1]()) if i % 2 == 0 else tuple(reversed((pair[1](), pair[0]())))
                served.append(a["decode_tok_s"])
                chat.append(b["decode_tok_s"])
                print(f"  run {i + 1}: server stream {a['decode_tok_s']:.1f} tok/s ({a['gen_tokens']} tokens), "
                      f"tailor chat {b['decode_tok_s']:.1f} tok/s ({b['gen_tokens']} tokens)", flush=True)
            if served:
                ratio = statistics.median(served) / statistics.median(chat)
                # On a shared machine a run may be slowed by others' work: the best run of each side
                # is its speed with the least interference.
                best = max(served) / max(chat)
                print(f"decode through the server / tailor chat: {ratio:.3f} median, {best:.3f} best run "
                      "(target >= 0.95)")
            http_ttft, engine_ttft = [], []
            for i in range(TTFT_RUNS):
                if i % 2:
                    engine_ttft.append(direct(engine, 4)["ttft_s"])
                    http_ttft.append(through_server(http, server.url, model, 4)["ttft_s"])
                else:
                    http_ttft.append(through_server(http, server.url, model, 4)["ttft_s"])
                    engine_ttft.append(direct(engine, 4)["ttft_s"])
            added_ms = statistics.median(h - e for h, e in zip(http_ttft, engine_ttft, strict=True)) * 1000
            print(f"TTFT through the server {statistics.median(http_ttft) * 1000:.1f} ms, engine direct "
                  f"{statistics.median(engine_ttft) * 1000:.1f} ms: the server adds {added_ms:.1f} ms (target <= 20 ms)")
        finally:
            http.close()
            server.stop()
            engine.shutdown()


if __name__ == "__main__":
    main()

"""Parallel requests on one GGUF model: 4 concurrent streamed requests through `tailor serve` against
the same requests one at a time, and the time to first token of a request arriving while 3 stream.

One `tailor serve --parallel 4` process (the starter model, its defaults), as users run it; clients
stream over HTTP from threads. Side by side, alternating (ABAB, TAILOR_BENCH_RUNS rounds):
- aggregate decode: the tokens of 4 greedy replies over the wall time from the first request to the
  last token, all 4 at once against one after another; target >= 2.5x. How many replies are identical
  both ways is printed, each way run on a fresh server (identical_replies says why);
- TTFT: a new request's time to first token while 3 others stream, against its TTFT alone (median);
  target <= 1.5x.
For scale it prints what llama.cpp itself gives here: tokens per second of one step decoding 4
sequences against one step decoding 1 (the most batching can win on this CPU, whatever the server).

    python -m tests.bench.gguf_parallel
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from engine.starter import starter_model_path

RUNS = int(os.environ.get("TAILOR_BENCH_RUNS", "3"))
MAX_TOKENS = 128
QUESTIONS = (
    "Write a long story about a dragon who learns to bake bread.",
    "Explain how a bicycle works, part by part.",
    "Describe a day in the life of a lighthouse keeper.",
    "Write a letter to a friend about a trip to the mountains.",
)
NEWCOMER = "What is the capital of France? Answer in one sentence."
MODEL = "SmolLM2-135M-Instruct.Q4_1"  # the starter model's id (GET /v1/models)


def stream(http: httpx.Client, url: str, question: str, max_tokens: int = MAX_TOKENS) -> dict:
    """One streamed greedy reply: its text, TTFT, tokens and when it ended."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": question}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first, pieces, tokens = None, [], 0
    with http.stream("POST", f"{url}/chat/completions", json=body, timeout=300) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = httpx.Response(200, content=line[6:]).json()
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                if choice["delta"].get("content"):
                    first = first or time.perf_counter()
                    pieces.append(choice["delta"]["content"])
    return {"text": "".join(pieces), "ttft": (first or time.perf_counter()) - t0, "tokens": tokens,
            "end": time.perf_counter()}


def at_once(url: str, questions: tuple[str, ...], max_tokens: int = MAX_TOKENS) -> list[dict]:
    results: list[dict | None] = [None] * len(questions)

    def one(i: int) -> None:
        with httpx.Client() as http:
            results[i] = stream(http, url, questions[i], max_tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return results  # type: ignore[return-value]


def one_after_another(url: str) -> list[dict]:
    with httpx.Client() as http:
        return [stream(http, url, q) for q in QUESTIONS]


def aggregate(url: str) -> tuple[float, float]:
    """(tok/s one after another, tok/s all at once)."""
    t0 = time.perf_counter()
    alone = one_after_another(url)
    serial = sum(r["tokens"] for r in alone) / (alone[-1]["end"] - t0)
    t0 = time.perf_counter()
    together = at_once(url, QUESTIONS)
    return serial, sum(r["tokens"] for r in together) / (max(r["end"] for r in together) - t0)


def identical_replies() -> int:
    """How many of the 4 replies are the same at once as one after another, each way on a fresh server.

    Fresh, because a reply's cells lie where earlier conversations left room: llama.cpp's CPU attention
    for a single token splits a cache view of 512 cells or more over its threads, at boundaries that move
    with the view, so the same request can round differently beside other conversations' cells.
    """
    texts = []
    for run in (one_after_another, lambda url: at_once(url, QUESTIONS)):
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as home:
            proc, url = serve(home)
            try:
                texts.append([r["text"] for r in run(url)])
            finally:
                stop(proc)
    return sum(a == b for a, b in zip(*texts, strict=True))


def ttft_beside_three(url: str) -> tuple[float, float]:
    """(TTFT of the newcomer alone, TTFT of it while 3 long replies stream)."""
    with httpx.Client() as http:
        alone = stream(http, url, NEWCOMER, max_tokens=8)["ttft"]
    busy: list[dict] = []
    streams = threading.Thread(target=lambda: busy.extend(at_once(url, QUESTIONS[:3], max_tokens=400)))
    streams.start()
    time.sleep(1.0)  # the three are streaming by now (their prompts take ~50 ms); no assertion hangs on it
    with httpx.Client() as http:
        beside = stream(http, url, NEWCOMER, max_tokens=8)["ttft"]
    streams.join(600)
    return alone, beside


def llama_cpp_ceiling(steps: int = 40) -> float:
    """Tokens per second of a step of 4 sequences over a step of 1, measured on llama.cpp directly."""
    from engine.gguf.llama_handle import BatchRow, LlamaHandle, LlamaSettings, install_log_callback

    quiet = install_log_callback(lambda *_: None)  # llama.cpp's log would fill the bench's output
    llama = LlamaHandle(starter_model_path(), LlamaSettings(n_ctx=4096, n_threads=os.cpu_count() or 1, n_seq=4),
                        lambda: None)
    try:
        prompt = llama.tokenize(QUESTIONS[0].encode(), add_bos=True, special=False)
        rates = {}
        for n in (1, 4):
            llama.clear()
            for seq in range(n):
                assert llama.decode(prompt, 0, seq) == 0
            t0 = time.perf_counter()
            for k in range(steps):
                rows = [BatchRow(100 + k, len(prompt) + k, seq, True) for seq in range(n)]
                assert llama.decode_rows(rows) == 0
            rates[n] = n * steps / (time.perf_counter() - t0)
        return rates[4] / rates[1]
    finally:
        llama.close()
        del quiet


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)  # Ctrl+C, as a user stops it: the engine saves its prefixes and exits
    proc.wait(60)


def serve(home: str) -> tuple[subprocess.Popen, str]:
    tailor = str(Path(sys.executable).with_name("tailor"))
    proc = subprocess.Popen([tailor, "serve", "--port", "0", "--parallel", "4"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TAILOR_HOME": home})
    for line in proc.stderr:  # type: ignore[union-attr]
        if m := re.search(r"serving on (\S+)", line):
            return proc, m[1]
    raise RuntimeError(f"tailor serve did not start (exit {proc.wait()})")


def main() -> None:
    same = identical_replies()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as home:
        proc, url = serve(home)
        try:
            at_once(url, QUESTIONS, max_tokens=8)  # warm: each prompt's prefix, the threads
            serial, parallel = [], []
            for _ in range(RUNS):
                one, four = aggregate(url)
                serial.append(one)
                parallel.append(four)
            ttfts = [ttft_beside_three(url) for _ in range(RUNS)]
        finally:
            stop(proc)
    ratio = statistics.median(parallel) / statistics.median(serial)
    print(f"4 streams at once vs one after another: {statistics.median(parallel):.0f} vs "
          f"{statistics.median(serial):.0f} tok/s aggregate = {ratio:.2f}x (target >= 2.5x); "
          f"replies identical on fresh servers: {same} of {len(QUESTIONS)}")
    alone = statistics.median(a for a, _ in ttfts)
    beside = statistics.median(b for _, b in ttfts)
    print(f"TTFT of a request while 3 stream: {beside * 1000:.0f} ms vs {alone * 1000:.0f} ms alone = "
          f"{beside / alone:.2f}x (target <= 1.5x)")
    print(f"llama.cpp itself on this CPU: a step of 4 sequences makes {llama_cpp_ceiling():.2f}x the tokens per "
          "second of a step of 1 (the most batching can give here)")


if __name__ == "__main__":
    main()

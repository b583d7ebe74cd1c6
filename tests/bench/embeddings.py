"""Embedding throughput through the engine process: 64 short texts in one request (batched) against the same
64 one request at a time, for the starter model (a chat model: its embedding context beside the chat's), a
tiny BERT (an embedding model, tests/fixtures/tiny_bert.py: 128 wide, 2 layers) and one as wide as bge-base (768,
12 heads, FFN 3072; 2 layers). Alternating ABAB over TAILOR_BENCH_RUNS rounds;
the median inputs per second of each way, and how far a batched vector is from the same text's alone.

    python -m tests.bench.embeddings
"""

from __future__ import annotations

import math
import os
import queue
import statistics
import tempfile
import time
from pathlib import Path

from engine.client import EngineClient
from engine.protocol import Embeddings, Error, Event, Loaded, LoadRequest
from engine.starter import starter_model_path
from tests.fixtures.tiny_bert import BertSpec, write_tiny_bert
from tests.fixtures.tiny_gguf import borrow_tokenizer

RUNS = int(os.environ.get("TAILOR_BENCH_RUNS", "3"))
TEXTS = [f"Note {i}: the meeting about item {i * 7} moved to room {100 + i}." for i in range(64)]


def embed(client: EngineClient, inputs: list[str]) -> Embeddings:
    inbox: queue.Queue[Event] = queue.Queue()
    client.embed(inputs, on_event=inbox.put)
    answer = inbox.get(timeout=600)
    if isinstance(answer, Error):
        raise RuntimeError(answer.message)
    return answer


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


def measure(model: Path, logs: Path) -> None:
    client = EngineClient(log_path=logs / f"{model.stem}.log")
    client.start()
    try:
        client.load(LoadRequest(str(model), n_ctx=2048))
        while not isinstance(event := client.next_event(timeout=120), Loaded | Error):
            pass
        if isinstance(event, Error):
            raise RuntimeError(event.message)
        embed(client, TEXTS[:2])  # the chat model's embedding context is made at its first request
        batched, alone = [], []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            together = embed(client, TEXTS)
            batched.append(len(TEXTS) / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            singles = [embed(client, [text]) for text in TEXTS]
            alone.append(len(TEXTS) / (time.perf_counter() - t0))
        worst = min(cosine(together.floats(i), s.floats(0)) for i, s in enumerate(singles))
        tokens = sum(together.tokens)
        print(f"{model.stem}: {len(TEXTS)} texts ({tokens} tokens, {together.dim} dims): "
              f"batched {statistics.median(batched):.1f} inputs/s, one at a time {statistics.median(alone):.1f} "
              f"inputs/s ({statistics.median(batched) / statistics.median(alone):.2f}x); "
              f"batched vs alone: 1 - cosine at most {1 - worst:.1e}", flush=True)
    finally:
        client.shutdown()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        starter = starter_model_path()
        tokenizer = borrow_tokenizer(starter)
        bert = write_tiny_bert(folder / "tiny-bert.gguf", tokenizer)
        wide = write_tiny_bert(folder / "bge-base-wide-bert.gguf", tokenizer,
                               BertSpec(n_layers=2, n_embd=768, n_heads=12, n_ff=3072, name="BERT as wide as bge-base"))
        for model in (starter, bert, wide):
            measure(model, folder)


if __name__ == "__main__":
    main()

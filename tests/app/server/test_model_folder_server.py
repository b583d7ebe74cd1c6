"""`tailor serve --model FOLDER --parallel 2`: a Hugging Face model folder (the PyTorch engine) serves
two streamed replies at once, each what it is alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import openai

from tests.app.server.test_serve_config import serve_process
from tests.fixtures.tiny_hf import write_tiny_model

# The tiny model's greedy replies to these run to max_tokens (no end of generation before 300 tokens).
QUESTIONS = ("Hello, how are you today?", "The quick brown fox jumps over the lazy dog.")
TOKENS = 300


def ask(client: openai.OpenAI, model: str, question: str) -> openai.Stream:
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}],
                                          max_tokens=TOKENS, temperature=0, stream=True)


def test_serve_parallel_batches_a_model_folder(tmp_path: Path) -> None:
    folder = tmp_path / "tiny-qwen2"
    write_tiny_model(folder, "qwen2")
    args = ["--model", str(folder), "--port", "0", "--ctx", "512", "--parallel", "2"]
    with serve_process(args, tmp_path / "home") as (_, url):
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        model = client.models.list().data[0].id
        alone = {q: "".join(c.choices[0].delta.content or "" for c in ask(client, model, q) if c.choices)
                 for q in QUESTIONS}
        spans: dict[str, tuple[float, float]] = {}
        texts: dict[str, str] = {}

        def stream(question: str) -> None:
            pieces, first = [], None
            for chunk in ask(client, model, question):
                if chunk.choices and chunk.choices[0].delta.content:
                    first = first or time.monotonic()
                    pieces.append(chunk.choices[0].delta.content)
            spans[question], texts[question] = (first, time.monotonic()), "".join(pieces)

        threads = [threading.Thread(target=stream, args=(q,)) for q in QUESTIONS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert texts == alone and all(texts.values())
    # Both streamed at once: each began before the other ended (one at a time, the second would start after).
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())

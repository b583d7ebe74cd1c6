"""Replies at once on a model folder: aggregate tok/s of 4 concurrent requests vs the same 4 one at a time.

Through the engine process, as `tailor serve --parallel 4` drives it: four GenerateRequests sent together
(the engine batches them in one LLMEngine step each) against four sent one after another. Greedy, speculative
decoding off (it is a separate figure: tests/bench/torch_engine.py; here once more with the CPU's default,
prompt lookup, whose drafts are verified inside the batch), each request its own first words so no prefix
is shared. Models: the tiny test folder (2 layers: the engine's per-step overhead) and the starter
model dequantized to a dense fp32 folder (SmolLM2-135M: the decode of a real model), when it is installed.

    python -m tests.bench.torch_parallel      # TAILOR_BENCH_THREADS (default 2)
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from engine.client import EngineClient
from engine.protocol import ChatMessage, Done, Error, Loaded, LoadRequest, SamplingParams
from engine.starter import StarterModelMissing, starter_model_path
from models.plan.load_options import SpeculativeOptions

THREADS = int(os.environ.get("TAILOR_BENCH_THREADS", "2"))
STREAMS = 4
TOKENS = 64
GREEDY = SamplingParams(temperature=0.0, max_tokens=TOKENS)
TOPICS = ("a fox who learns to sail", "the history of bread", "a lighthouse keeper's day", "how rivers form")


def questions(round_no: int) -> list[list[ChatMessage]]:
    """STREAMS chats that share no prefix with any earlier one (the round number comes first)."""
    return [[ChatMessage("user", f"{round_no * STREAMS + i}. Tell me a long story about {topic}.")]
            for i, topic in enumerate(TOPICS[:STREAMS])]


def wait_all(client: EngineClient, pending: list[int]) -> int:
    """Wait for the replies `pending`; the tokens they generated."""
    tokens = 0
    while pending:
        event = client.next_event(timeout=600)
        if isinstance(event, Error) or event is None:
            raise RuntimeError(f"the engine failed a reply: {event}")
        if isinstance(event, Done) and event.request_id in pending:
            pending.remove(event.request_id)
            tokens += event.stats.gen_tokens
    return tokens


def run(client: EngineClient, chats: list[list[ChatMessage]], together: bool) -> tuple[int, float]:
    """Generated tokens and wall seconds of `chats`, sent all at once or each after the last one ended."""
    t0 = time.perf_counter()
    if together:
        tokens = wait_all(client, [client.generate(c, GREEDY) for c in chats])
    else:
        tokens = sum(wait_all(client, [client.generate(c, GREEDY)]) for c in chats)
    return tokens, time.perf_counter() - t0


def measure(directory: Path, label: str, speculation: str = "off") -> None:
    """Best of 2 rounds each way, alternating, on one engine loaded with room for STREAMS replies;
    `speculation`: the load's mode ("auto" is prompt lookup on the CPU: drafts verified inside the batch)."""
    client = EngineClient()
    client.start()
    try:
        client.load(LoadRequest(str(directory), n_ctx=512, n_threads=THREADS, n_parallel=STREAMS,
                                speculation=SpeculativeOptions(mode=speculation)))
        while not isinstance(event := client.next_event(timeout=600), Loaded):
            if isinstance(event, Error) or event is None:
                raise RuntimeError(f"{label} did not load: {event}")
        run(client, questions(0), together=False)  # warm-up
        alone, together = [], []
        for r in range(2):
            n, s = run(client, questions(1 + 2 * r), together=False)
            alone.append(n / s)
            n, s = run(client, questions(2 + 2 * r), together=True)
            together.append(n / s)
        print(f"{label}: aggregate tok/s, {STREAMS} requests at once {max(together):.1f}, one at a time "
              f"{max(alone):.1f}: {max(together) / max(alone):.2f}x (greedy, {TOKENS} tokens each at most, "
              f"{THREADS} threads, speculative decoding {speculation}, best of 2)")
    finally:
        client.shutdown()


def main() -> None:
    from tests.fixtures.tiny_hf import write_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny-qwen2"
        write_tiny_model(tiny, "qwen2")
        measure(tiny, "tiny folder (2 layers, hidden 128)")
        try:
            starter = starter_model_path()
        except StarterModelMissing:
            print("starter model not installed: its dense folder is skipped")
            return
        from tests.fixtures.gguf_to_hf import convert

        dense = Path(tmp) / "starter-dense"
        convert(starter, dense)
        measure(dense, "starter model, dense fp32 (SmolLM2-135M)")
        measure(dense, "starter model, dense fp32 (SmolLM2-135M)", speculation="auto")


if __name__ == "__main__":
    main()

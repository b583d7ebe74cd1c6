"""Prefix cache: TTFT with a warm prefix as a fraction of cold TTFT, state bytes ÷ KV bytes.

Starter model, 2 threads, 2,000-token histories, greedy. Each round measures a cold prompt
and then every scenario once (alternating cold and warm); figures are medians over rounds.

    python -m tests.bench.prefix_cache          # ROUNDS=3 by default; set TAILOR_BENCH_ROUNDS
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import llama_cpp

from engine.gguf.backend import GgufBackend
from engine.gguf.log_bridge import LlamaLogBridge
from engine.gguf.prefix_cache import restore_state, save_state
from engine.protocol import ChatMessage, GenerateRequest, LoadRequest, SamplingParams
from engine.starter import starter_model_path

ROUNDS = int(os.environ.get("TAILOR_BENCH_ROUNDS", "3"))
N_CTX = 4096
HISTORY_TOKENS = 2000
GREEDY = SamplingParams(temperature=0.0, max_tokens=4, seed=1)
NEW_MESSAGE = (
    "Thank you. Now please tell me, in one short sentence, what the most important point of all that was?"
)


def _system(topic: str, tokens: int) -> str:
    """A system prompt of about `tokens` tokens (about 18 tokens a sentence)."""
    return " ".join(
        f"Note {i} about {topic}: keep the answer clear, short and kind." for i in range(tokens // 13)
    )


class Engine:
    def __init__(self, cache_bytes: int, cache_dir: str | None = None):
        self.backend = GgufBackend(LlamaLogBridge())
        self.backend.load(
            LoadRequest(
                str(starter_model_path()),
                n_ctx=N_CTX,
                n_threads=2,
                prefix_cache_bytes=cache_bytes,
                prefix_cache_dir=cache_dir,
            )
        )

    def ttft(self, messages: list[ChatMessage]) -> tuple[float, int, int]:
        request = GenerateRequest(1, tuple(messages), GREEDY)
        done = self.backend.generate(request, lambda _t: None, lambda: False)
        return done.stats.ttft_s, done.stats.prompt_tokens, done.stats.cached_tokens

    def forget_live(self) -> None:
        llm = self.backend._llm
        llm._ctx.kv_cache_clear()
        llm.reset()

    def close(self) -> None:
        self.backend.close()


def conversation(topic: str, *turns: str) -> list[ChatMessage]:
    msgs = [ChatMessage("system", _system(topic, HISTORY_TOKENS)), ChatMessage("user", "Hello.")]
    for t in turns:
        msgs += [ChatMessage("assistant", "Hello! How can I help?"), ChatMessage("user", t)]
    return msgs


def main() -> None:
    cold: list[float] = []
    next_turn: list[float] = []
    switches: list[float] = []
    shared: list[float] = []
    restart: list[float] = []
    save_restore: list[float] = []
    ratio = 0.0
    cold_engine = Engine(cache_bytes=0)
    warm = Engine(cache_bytes=1 << 30)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ROUNDS):
            a, b = conversation(f"apples {r}"), conversation(f"boats {r}")
            cold_engine.forget_live()
            t_cold, n_prompt, _ = cold_engine.ttft(conversation(f"cold {r}"))
            cold.append(t_cold)

            warm.ttft(a)  # same conversation, next turn
            next_turn.append(warm.ttft(conversation(f"apples {r}", NEW_MESSAGE))[0])

            warm.ttft(b)  # switching back and forth between two conversations
            for i in range(5):
                for topic in (f"apples {r}", f"boats {r}"):
                    t, _, cached = warm.ttft(conversation(topic, f"Question {i}?"))
                    switches.append(t)

            shared_sys = _system(f"shared {r}", HISTORY_TOKENS)
            warm.ttft([ChatMessage("system", shared_sys), ChatMessage("user", "First chat.")])
            warm.ttft(b)
            shared.append(
                warm.ttft([ChatMessage("system", shared_sys), ChatMessage("user", "A new chat.")])[0]
            )

            disk = Engine(cache_bytes=1 << 30, cache_dir=str(Path(tmp) / f"r{r}"))
            disk.ttft(conversation(f"disk {r}"))
            disk.close()  # the engine exits: its live state goes to disk
            disk = Engine(cache_bytes=1 << 30, cache_dir=str(Path(tmp) / f"r{r}"))
            restart.append(disk.ttft(conversation(f"disk {r}", NEW_MESSAGE))[0])
            disk.close()

            llm = warm.backend._llm
            warm.ttft(a)
            t0 = time.perf_counter()
            state = save_state(llm._ctx.ctx)
            llm._ctx.kv_cache_clear()
            assert state is not None and restore_state(llm._ctx.ctx, state)
            save_restore.append((time.perf_counter() - t0) / t_cold)
            model = llm.model
            head_dim = llama_cpp.llama_model_n_embd(model) // llama_cpp.llama_model_n_head(model)
            kv = (
                2
                * llama_cpp.llama_model_n_layer(model)
                * llama_cpp.llama_model_n_head_kv(model)
                * head_dim
                * 2
            )
            ratio = len(state) / (kv * llm.n_tokens)
            warm.forget_live()
    cold_engine.close()
    warm.close()
    c = statistics.median(cold)
    print(f"cold TTFT, {n_prompt}-token prompt: {c:.2f} s (median of {ROUNDS})")
    for name, values, target in (
        ("same conversation, next turn", next_turn, 0.03),
        ("after each switch between two conversations (5 times back and forth)", switches, 0.05),
        ("new conversation sharing a 2,000-token system prompt", shared, 0.05),
        ("after an engine restart (disk tier)", restart, 0.10),
    ):
        m = statistics.median(values)
        print(f"{name}: TTFT {m * 1000:.0f} ms = {m / c:.1%} of cold (target <= {target:.0%})")
    print(
        f"save + restore of the 2,000-token state: {statistics.median(save_restore):.1%} of its cold prefill"
    )
    print(f"state bytes / KV bytes: {ratio:.3f} (target <= 1.5)")


if __name__ == "__main__":
    main()

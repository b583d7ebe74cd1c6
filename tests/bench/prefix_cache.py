"""Prefix cache: TTFT with a warm prefix as a fraction of cold TTFT; state bytes; KV types.

Starter model, 2 threads, greedy, histories of 2,000 tokens (system prompt + first message,
counted with the model's tokenizer). Each round measures a cold prompt and then every
scenario once, so cold and warm runs alternate; figures are medians over rounds.

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
from engine.gguf.llama_handle import LlamaHandle
from engine.gguf.log_bridge import LlamaLogBridge
from engine.gguf.sampling import make_sampler
from engine.protocol import ChatMessage, GenerateRequest, LoadRequest, ReplyShape, SamplingParams
from engine.starter import starter_model_path
from tests.fixtures.format_models import format_model

ROUNDS = int(os.environ.get("TAILOR_BENCH_ROUNDS", "3"))
HISTORY_TOKENS = 2000
GREEDY = SamplingParams(temperature=0.0, max_tokens=4, seed=1)
NEW_MESSAGE = "Thank you. Now tell me, in one short sentence, what the most important point of all that was?"
DEPTH = 4000  # KV types: decode speed with this many tokens in the cache
DECODE_STEPS = 48


class Engine:
    """One backend in this process (no IPC: the figures are the engine's own)."""

    def __init__(self, n_ctx: int, cache_bytes: int = 1 << 30, cache_dir: str | None = None,
                 model: Path | None = None, **load):
        self.idle_s: list[float] = []
        self.backend = GgufBackend(LlamaLogBridge())
        self.backend.load(
            LoadRequest(
                str(model or starter_model_path()),
                n_ctx=n_ctx,
                n_threads=2,
                prefix_cache_bytes=cache_bytes,
                prefix_cache_dir=cache_dir,
                **load,
            )
        )

    def ask(self, messages: list[ChatMessage], shape: ReplyShape | None = None, sampling: SamplingParams = GREEDY):
        """A reply, then the idle work the engine process does before it waits for the next request
        (the reply's next turn prefilled: next_turn.py), timed apart in `idle_s`."""
        request = GenerateRequest(1, tuple(messages), sampling, shape=shape or ReplyShape())
        done = self.backend.generate(request, lambda _t, reasoning=False: None, lambda: False)
        t0 = time.perf_counter()
        if self.backend.idle():
            self.idle_s.append(time.perf_counter() - t0)
        return done

    def ttft(self, messages: list[ChatMessage], shape: ReplyShape | None = None) -> float:
        return self.ask(messages, shape).stats.ttft_s

    def tokens(self, messages: list[ChatMessage]) -> int:
        b = self.backend
        return len(b._tokenize(b._template.render(messages)))

    def close(self) -> None:
        self.backend.close()


def system_prompt(engine: Engine, topic: str, history_tokens: int = HISTORY_TOKENS) -> str:
    """A system prompt that makes [system, "Hello."] `history_tokens` long (within one note)."""
    notes: list[str] = []
    i = 0
    while True:
        note = f"Note {i} about {topic}: keep the answer clear, short and kind."
        if engine.tokens([ChatMessage("system", " ".join([*notes, note])), ChatMessage("user", "Hello.")]) > (
            history_tokens
        ):
            return " ".join(notes)
        notes.append(note)
        i += 1


def first_turn(system: str) -> list[ChatMessage]:
    return [ChatMessage("system", system), ChatMessage("user", "Hello.")]


def next_turn(system: str, reply: str, message: str) -> list[ChatMessage]:
    """The history as the app sends it: the model's own reply, then the new message."""
    return [*first_turn(system), ChatMessage("assistant", reply), ChatMessage("user", message)]


def ratio_line(name: str, values: list[float], cold: float, target: float) -> str:
    m = statistics.median(values)
    return f"{name}: TTFT {m * 1000:.0f} ms = {m / cold:.1%} of cold (target <= {target:.0%})"


def prefix_scenarios() -> list[str]:
    cold, same, switches, shared, pinned, restart, save_restore = ([] for _ in range(7))
    state_ratio = 0.0
    cold_engine = Engine(4096, cache_bytes=0)
    warm = Engine(4096)  # the app's default context
    sizes = set()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ROUNDS):
            sys_a, sys_b = system_prompt(warm, f"apples {r}"), system_prompt(warm, f"boats {r}")
            sizes.add(warm.tokens(first_turn(sys_a)))
            cold_engine.backend._prefixes.seqs.clear()
            cold.append(cold_engine.ttft(first_turn(system_prompt(warm, f"cold {r}"))))

            reply = warm.ask(first_turn(sys_a)).text  # same conversation, next turn
            same.append(warm.ttft(next_turn(sys_a, reply, NEW_MESSAGE)))

            warm.ask(first_turn(sys_a))
            warm.ask(first_turn(sys_b))
            for i in range(5):  # back and forth five times
                for system in (sys_a, sys_b):
                    switches.append(warm.ttft(next_turn(system, "Hello!", f"Question {i}?")))

            shared_sys = system_prompt(warm, f"shared {r}")
            warm.ask([ChatMessage("system", shared_sys), ChatMessage("user", "First chat.")])
            warm.ask(first_turn(sys_b))
            shared.append(warm.ttft([ChatMessage("system", shared_sys), ChatMessage("user", "A new chat.")]))

            pinned_engine = Engine(4096, pinned_prompts=(shared_sys,))  # prefilled while loading
            pinned.append(pinned_engine.ttft([ChatMessage("system", shared_sys), ChatMessage("user", "Hi.")]))
            pinned_engine.close()

            folder = str(Path(tmp) / f"r{r}")
            disk = Engine(4096, cache_dir=folder)
            disk_reply = disk.ask(first_turn(f"{sys_a} (disk)")).text
            disk.close()  # the engine exits: what it held goes to disk
            disk = Engine(4096, cache_dir=folder)
            restart.append(disk.ttft(next_turn(f"{sys_a} (disk)", disk_reply, NEW_MESSAGE)))
            disk.close()

            llm, seqs = warm.backend._llama, warm.backend._prefixes.seqs
            warm.ask(first_turn(sys_a))
            live = seqs.live_tokens
            t0 = time.perf_counter()
            state = llm.save_state(0)
            seqs.clear_live()
            assert state is not None and llm.restore_state(state, 0)
            save_restore.append((time.perf_counter() - t0) / cold[-1])
            seqs.live_restored(live)
            state_ratio = len(state) / (kv_bytes_per_token(llm) * seqs.n_live)
            print(f"  round {r + 1}/{ROUNDS}: cold {cold[-1]:.2f} s, next turn {same[-1] * 1000:.0f} ms", flush=True)
    for engine in (cold_engine, warm):
        engine.close()
    c = statistics.median(cold)
    return [
        f"cold TTFT, {min(sizes)}-{max(sizes)}-token prompt: {c:.2f} s (median of {ROUNDS})",
        ratio_line("same conversation, next turn (~30 new tokens)", same, c, 0.03),
        ratio_line("after each switch between two conversations (5 times back and forth)", switches, c, 0.05),
        ratio_line("new conversation sharing a 2,000-token system prompt", shared, c, 0.05),
        ratio_line("first message after loading with that system prompt pinned", pinned, c, 0.05),
        ratio_line("after an engine restart (disk tier)", restart, c, 0.10),
        f"save + restore of a 2,000-token state: {statistics.median(save_restore):.1%} of its cold prefill "
        "(target <= 5%)",
        f"state bytes / KV bytes: {state_ratio:.3f} (target <= 1.5)",
        idle_line(warm),
    ]


def idle_line(engine: Engine) -> str:
    """What the idle work after each reply took (the next turn's history prefilled while the user reads)."""
    spent = engine.idle_s or [0.0]
    return (f"  idle work after a reply (its next turn's history prefilled): median {statistics.median(spent) * 1000:.0f} ms"
            f", at most {max(spent) * 1000:.0f} ms, after {len(engine.idle_s)} replies")


def reasoning_next_turn() -> list[str]:
    """The same conversation's next turn on a reasoning model (the starter's weights under QwQ's template,
    whose prompt opens the think block): the reply thought first, and the next turn's history holds its
    answer only, as the templates expect. The cache holds the thinking; what is reused is the history
    up to it, so the next turn prefills the last answer and the new message."""
    thinking = ReplyShape(think_budget=24)
    long_reply = SamplingParams(temperature=0.0, max_tokens=48, seed=1)
    cold, same = [], []
    with tempfile.TemporaryDirectory() as tmp:
        model = format_model(Path(tmp), "qwq")
        cold_engine, warm = Engine(4096, cache_bytes=0, model=model), Engine(4096, model=model)
        for r in range(ROUNDS):
            system = system_prompt(warm, f"thoughts {r}")
            cold_engine.backend._prefixes.seqs.clear()
            cold.append(cold_engine.ttft(first_turn(system_prompt(warm, f"cold thoughts {r}")), thinking))
            first = warm.ask(first_turn(system), thinking, long_reply)
            assert first.reasoning and first.stats.reasoning_tokens, "the reply did not think"
            same.append(warm.ttft(next_turn(system, first.text, NEW_MESSAGE), thinking))
        for engine in (cold_engine, warm):
            engine.close()
    return [ratio_line("reasoning chat (QwQ's template), next turn after a reply that thought", same,
                       statistics.median(cold), 0.03), idle_line(warm)]


def image_next_turn() -> list[str]:
    """A chat with a picture: its first turn encodes the image (a projector of Gemma 3's encoder shape at
    448 px, 12 layers, random weights, paired with the starter model: tests/fixtures/tiny_projector.py); its
    next turn, and the turn after another chat took the slot (restored from RAM), find the picture in the
    cache and prefill only what is new."""
    import hashlib

    import numpy as np

    from engine.protocol import Media
    from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

    first_ttft, same, restored = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        mmproj = write_tiny_projector(Path(tmp) / "mmproj.gguf", TinyProjectorSpec(
            projector_type="gemma3", image_size=448, patch_size=14, n_embd=768, n_ff=3072, n_heads=12,
            n_layers=12, merge=4))
        engine = Engine(4096, mmproj=str(mmproj))
        for r in range(ROUNDS):
            pixels = np.random.default_rng(r).integers(0, 256, (600, 800, 3), dtype=np.uint8).tobytes()
            picture = Media("image", hashlib.sha256(pixels).hexdigest(), pixels, 800, 600)
            system = system_prompt(engine, f"pictures {r}", history_tokens=500)
            turn = [ChatMessage("system", system), ChatMessage("user", "What is in this picture?", media=(picture,))]
            first = engine.ask(turn)
            first_ttft.append(first.stats.ttft_s)
            same.append(engine.ttft([*turn, ChatMessage("assistant", first.text), ChatMessage("user", NEW_MESSAGE)]))
            engine.ask(first_turn(system_prompt(engine, f"another chat {r}", history_tokens=500)))
            restored.append(engine.ttft([*turn, ChatMessage("assistant", first.text),
                                         ChatMessage("user", "And the colours?")]))
        engine.close()
    cold = statistics.median(first_ttft)
    return [f"chat with a picture (~500-token history, one image encoded): first turn TTFT {cold * 1000:.0f} ms",
            ratio_line("  its next turn", same, cold, 0.10),
            ratio_line("  its next turn after another chat took the slot (restored from RAM)", restored, cold, 0.10)]


def document_asked_twice() -> list[str]:
    """A 60-page PDF too long for the context (tests/app/services/documents/makers.py), asked about: the message
    holds the passages retrieved for it (app/chat/document_context.py, counted by the model's tokenizer), kept
    with the message as sent; the next question about it finds them in the cache and prefills only itself."""
    from app.chat.document_context import document_budget, document_context
    from app.services.documents.extract import extract_document
    from tests.app.services.documents.makers import filler, pdf_with_pages

    first_ttft, again, block_tokens = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(4096)
        count = lambda text: engine.tokens([ChatMessage("user", text)]) - engine.tokens([ChatMessage("user", "")])  # noqa: E731
        for r in range(ROUNDS):
            pages = {n: filler(n + 100 * r, 350) for n in range(1, 61)}
            pages[37] = f"{filler(37, 120)} The lighthouse keeper's parrot is named Archimedes Quill. {filler(38, 120)}"
            document = extract_document(pdf_with_pages(Path(tmp) / f"report-{r}.pdf", pages, 60))
            question = "What is the name of the lighthouse keeper's parrot, and when is the library open?"
            system = ChatMessage("system", "You are Tailor, a helpful assistant.")
            budget = document_budget(4096, engine.tokens([system, ChatMessage("user", question)]), GREEDY.max_tokens)
            context = document_context([document], question, budget, count)
            block_tokens.append(context.tokens)
            turn = [system, ChatMessage("user", context.message(question))]
            first = engine.ask(turn)
            first_ttft.append(first.stats.ttft_s)
            again.append(engine.ttft([*turn, ChatMessage("assistant", first.text),
                                      ChatMessage("user", "And what colour is the parrot?")]))
        engine.close()
    cold = statistics.median(first_ttft)
    return [f"a 60-page PDF asked about ({statistics.median(block_tokens):.0f} tokens of passages retrieved): "
            f"first question TTFT {cold * 1000:.0f} ms",
            ratio_line("  the next question about it", again, cold, 0.10)]


def bare_next_turn() -> list[str]:
    """The same next turn on a bare `llama_cpp.Llama`, its prefix still in its context."""
    engine = Engine(4096, cache_bytes=0)  # for the template, the tokens and the replies
    bare = llama_cpp.Llama(
        str(starter_model_path()), n_ctx=4096, n_threads=2, n_batch=512, flash_attn=True, verbose=False
    )
    tokens_of = engine.backend._tokenize
    render = engine.backend._template.render
    cold: list[float] = []
    warm: list[float] = []
    for r in range(ROUNDS):
        system = system_prompt(engine, f"bare {r}")
        reply = engine.ask(first_turn(system)).text
        for prompt, results in (
            (tokens_of(render(first_turn(system))), cold),
            (tokens_of(render(next_turn(system, reply, NEW_MESSAGE))), warm),
        ):
            if results is cold:
                bare.reset()
                bare._ctx.kv_cache_clear()
            t0 = time.perf_counter()
            # As in the engine: the first reply's tokens are decoded into the context too.
            for n, _token in enumerate(bare.generate(prompt, reset=True, temp=0.0)):
                if n == 0:
                    results.append(time.perf_counter() - t0)
                if n + 1 == GREEDY.max_tokens:
                    break
    engine.close()
    bare.close()
    c = statistics.median(cold)
    return [ratio_line("bare llama-cpp-python, same next turn, prefix in its context", warm, c, 0.03)]


def kv_bytes_per_token(llm: LlamaHandle) -> int:
    model = llm.model_pointer
    head_dim = llama_cpp.llama_model_n_embd(model) // llama_cpp.llama_model_n_head(model)
    return 2 * llama_cpp.llama_model_n_layer(model) * llama_cpp.llama_model_n_head_kv(model) * head_dim * 2


def decode_speed_at_depth(engine: Engine, depth_tokens: list[int]) -> float:
    """Tokens per second of single-token decode steps with `depth_tokens` in the cache."""
    seqs = engine.backend._prefixes.seqs
    llm = engine.backend._llama
    seqs.clear()
    seqs.decode(depth_tokens, lambda: None)
    sampler = make_sampler(GREEDY)
    t0 = time.perf_counter()
    for _ in range(DECODE_STEPS):
        token = sampler.sample(llm)
        seqs.decode([token], lambda: None)
    elapsed = time.perf_counter() - t0
    sampler.close()
    return DECODE_STEPS / elapsed


def kv_types() -> list[str]:
    engines = {kv: Engine(DEPTH + 512, kv_type=kv, flash_attn=True) for kv in ("f16", "q8_0")}
    kv_bytes = {kv: e.backend._logs.buffers.total("kv") for kv, e in engines.items()}
    llm = engines["f16"].backend._llama
    text = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(DEPTH // 10))
    depth = llm.tokenize(text.encode(), add_bos=True, special=False)[:DEPTH]
    speeds: dict[str, list[float]] = {"f16": [], "q8_0": []}
    for r in range(ROUNDS):
        for kv in ("f16", "q8_0") if r % 2 == 0 else ("q8_0", "f16"):
            speeds[kv].append(decode_speed_at_depth(engines[kv], depth))
    for e in engines.values():
        e.close()
    f16, q8 = (statistics.median(speeds[k]) for k in ("f16", "q8_0"))
    return [
        f"KV bytes q8_0 / f16 (llama.cpp's buffers): {kv_bytes['q8_0'] / kv_bytes['f16']:.3f} (target <= 0.55)",
        f"decode at {len(depth):,} tokens deep, q8_0 / f16: {q8:.1f} / {f16:.1f} tok/s = {q8 / f16:.3f} "
        "(target >= 0.9)",
    ]


def main() -> None:
    for line in (prefix_scenarios() + reasoning_next_turn() + image_next_turn() + document_asked_twice()
                 + bare_next_turn() + kv_types()):
        print(line, flush=True)


if __name__ == "__main__":
    main()

"""Speculative decoding by prompt lookup in the GGUF engine: decode tok/s of `tailor chat` with
drafts against the same command without, side by side.

Tasks on the starter model, greedy: two rewrites (the reply copies most of the prompt: prompt
lookup's case; `--speculative lookup` vs `off`, target >= 1.5x): a record copied as JSON, which the
135M model copies faithfully, and a paragraph repeated, which it paraphrases in places; and a
free-form story (`--speculative auto`, the default, vs `off`: auto must not slow it down, target
>= 0.95x). Each run is a fresh `tailor chat` process, as users run it; ABBA order, 5 runs each
(TAILOR_BENCH_RUNS); the figure is the ratio of the medians. Whether the replies are identical is
printed: llama.cpp's CPU attention sums a single token's KV over threads once the cache view holds
512 cells or more, and a batch row otherwise, so a near tie may fall the other way (README).

    python -m tests.bench.gguf_speculation
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS = int(os.environ.get("TAILOR_BENCH_RUNS", "5"))
MAX_TOKENS = 200
TEXT = (
    "Our team met on Monday to review the plan for the new warehouse. The building will have three "
    "loading docks, a cold room for fresh food, and offices on the second floor. Work starts in April "
    "and should end in October, if the permits arrive on time. The budget is 2.4 million euros, of "
    "which 300,000 are kept for surprises. Maria will lead the project, and Tom will handle the "
    "contracts with the builders. We will meet again every second Tuesday to check progress."
)
REWRITE = f"Repeat the following text exactly as it is, word for word:\n\n{TEXT}"
RECORD = (
    '{"name": "Maria Lopez", "role": "project lead", "team": ["Tom", "Anna", "Chen"], "budget": 2400000, '
    '"start": "2027-04-01", "end": "2027-10-31", "docks": 3, "cold_room": true, "city": "Lisbon", '
    '"floors": 2, "permits": ["building", "fire", "food"], "review": "every second Tuesday"}'
)
COPY = f"Copy this JSON exactly:\n{RECORD}"
STORY = "Write a long story about a dragon who learns to bake bread."


def run(home: str, prompt: str, mode: str) -> tuple[str, dict]:
    """(reply text, stats) of one `tailor chat` process."""
    tailor = str(Path(sys.executable).with_name("tailor"))
    out = subprocess.run(
        [tailor, "chat", "--json", "--system", "", "--temperature", "0", "--ctx", "4096",
         "--max-tokens", str(MAX_TOKENS), "--speculative", mode, prompt],
        capture_output=True, text=True, check=True, env={**os.environ, "TAILOR_HOME": home},
    )
    *text, stats = out.stdout.rstrip("\n").splitlines()
    return "\n".join(text), json.loads(stats)


def compare(home: str, prompt: str, mode: str) -> tuple[float, float, bool, list[float]]:
    """(median tok/s with `mode`, without, every reply identical, acceptance per run)."""
    fast, plain, same, acceptance = [], [], True, []
    for i in range(RUNS):
        order = (mode, "off") if i % 2 == 0 else ("off", mode)
        results = {m: run(home, prompt, m) for m in order}
        (text_a, a), (text_b, b) = results[mode], results["off"]
        same = same and text_a == text_b
        fast.append(a["decode_tok_s"])
        plain.append(b["decode_tok_s"])
        acceptance.append(a.get("draft_acceptance") or 0.0)
        print(f"  run {i + 1}: {mode} {a['decode_tok_s']:.1f} tok/s ({a['gen_tokens']} tokens, "
              f"{acceptance[-1]:.0%} of drafts kept), off {b['decode_tok_s']:.1f} tok/s ({b['gen_tokens']} tokens)")
    return statistics.median(fast), statistics.median(plain), same, acceptance


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        run(home, STORY, "off")  # warm the page cache
        print("rewrite: a record copied as JSON (prompt lookup vs off):")
        fast, plain, same, _ = compare(home, COPY, "lookup")
        print(f"gguf_lookup_copy_ratio={fast / plain:.2f} ({fast:.1f} vs {plain:.1f} tok/s; target >= 1.5), "
              f"identical greedy replies: {same}")
        print("rewrite: a paragraph repeated (prompt lookup vs off):")
        fast, plain, same, _ = compare(home, REWRITE, "lookup")
        print(f"gguf_lookup_repeat_ratio={fast / plain:.2f} ({fast:.1f} vs {plain:.1f} tok/s), "
              f"identical greedy replies: {same}")
        print("free-form story (auto vs off):")
        fast, plain, same, _ = compare(home, STORY, "auto")
        print(f"gguf_auto_chat_ratio={fast / plain:.2f} ({fast:.1f} vs {plain:.1f} tok/s; target >= 0.95), "
              f"identical greedy replies: {same}")


if __name__ == "__main__":
    main()

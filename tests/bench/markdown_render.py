"""Markdown rendering of a long reply: the first render, and one streaming frame after it.

An 8,000-character reply (numbered paragraphs with inline code and links, a Python block every
third one) is rendered with an empty block cache (cold: target < 150 ms), then again with
one more token at its end, as the chat view does at every frame (warm: target < 5 ms; only the
last block is new). Median of 20 of each.

    python -m tests.bench.markdown_render
"""

from __future__ import annotations

import statistics
import time

from app.services.markdown_render import render_block, render_markdown
from tests.app.services.test_markdown_render import _reply

RUNS = 20


def measure() -> tuple[float, float, float]:
    """(first, cold, warm) render times in ms: the process's first render (the highlighter
    compiles its lexers), then medians of RUNS with an empty block cache and of a frame after."""
    text = _reply(8000)
    cold, warm = [], []
    for i in range(RUNS):
        render_block.cache_clear()
        started = time.perf_counter()
        render_markdown(text)
        cold.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        render_markdown(text + f" more{i}")  # a streaming frame: only the last block is new
        warm.append((time.perf_counter() - started) * 1000)
    return cold[0], statistics.median(cold), statistics.median(warm)


def main() -> None:
    first, cold, warm = measure()
    print(f"markdown_render_first_ms={first:.1f} (the process's first render, lexers compiled)")
    print(f"markdown_render_cold_ms={cold:.1f} (8,000 characters, empty cache; target < 150)")
    print(f"markdown_render_frame_ms={warm:.2f} (the same reply and one more token; target < 5)")


if __name__ == "__main__":
    main()

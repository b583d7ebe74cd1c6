"""The status bar's line for a finished reply, how much of its prompt the cache saved, and who shares the KV cache."""

from __future__ import annotations

from engine.protocol import MemoryReport


def cache_text(cached: int | None, prompt: int | None) -> str:
    """How much of the prompt came from cache; "unknown" what a remote server did not say."""
    if prompt is None:
        return "prompt tokens unknown"
    if cached is None:
        return f"{prompt:,} prompt tokens, from cache unknown"
    return f"{cached:,} of {prompt:,} prompt tokens from cache"


def tokens_text(stats: dict) -> str:
    """" · 340 thinking + 52 answer tokens" for a reply that reasoned; "" for one that did not."""
    thinking = stats.get("reasoning_tokens") or 0
    if not isinstance(thinking, int) or thinking <= 0:
        return ""
    answer = max(0, (stats.get("gen_tokens") or 0) - thinking)
    return f" · {thinking:,} thinking + {answer:,} answer tokens"


def format_stats(stats: dict | None) -> str:
    """One line for the status bar from a message's stats, with what the prompt cache saved."""
    if not stats:
        return ""
    # A count stored as null is unknown (a remote server that reported no usage): cache_text says so.
    prompt, cached = stats.get("prompt_tokens", 0), stats.get("cached_tokens", 0)
    prefill = stats.get("prefill_tok_s", 0)
    # The cached tokens would have been prefilled at this message's own prefill rate.
    saved = f" (~{cached / prefill:.1f} s saved)" if cached and prefill else ""
    # Speeds first: a narrow status bar cuts the end of the line, and the cache detail is also in the memory panel.
    # Speculative decoding: the share of drafted tokens the model kept (absent when nothing was drafted).
    kept = stats.get("draft_acceptance")
    drafts = f" ({kept:.0%} of drafts kept)" if kept is not None else ""
    return (
        f"decode {stats.get('decode_tok_s', 0):.1f} tok/s{drafts}{tokens_text(stats)}"
        f" · TTFT {stats.get('ttft_s', 0):.2f} s · prefill {prefill:.0f} tok/s · {cache_text(cached, prompt)}{saved}"
    )


def sequences_text(report: MemoryReport) -> str:
    """The conversations sharing the cache, where several replies may run at once (empty otherwise)."""
    if report.parallel <= 1:
        return ""
    held = report.kv_sequence_tokens
    if len(held) > 1:
        return f" by {len(held)} conversations ({' + '.join(f'{n:,}' for n in held)}); up to {report.parallel} at once"
    return f"; shared by up to {report.parallel} replies at once"

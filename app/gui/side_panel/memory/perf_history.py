"""The figures of recent replies: the last one, and rolling averages over a window. No Qt."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from engine.protocol import GenerationStats

ROLLING_WINDOW = 10  # replies averaged in the rolling figures
SPARK_POINTS = 30  # decode rates kept for the sparkline


@dataclass(slots=True, frozen=True)
class Rolling:
    """Averages over the last replies; rates weighted by the tokens they covered."""

    n: int
    ttft_s: float
    prefill_tok_s: float
    decode_tok_s: float
    cached_tokens: int | None  # None when a reply in the window did not know its counts (a remote one)
    prompt_tokens: int | None


class PerfHistory:
    def __init__(self, window: int = ROLLING_WINDOW, spark_points: int = SPARK_POINTS):
        self._recent: deque[GenerationStats] = deque(maxlen=window)
        self.decode_rates: deque[float] = deque(maxlen=spark_points)

    @property
    def last(self) -> GenerationStats | None:
        return self._recent[-1] if self._recent else None

    def add(self, stats: GenerationStats) -> None:
        self._recent.append(stats)
        if stats.gen_tokens > 1:  # a rate needs two tokens
            self.decode_rates.append(stats.decode_tok_s)

    def clear(self) -> None:
        self._recent.clear()
        self.decode_rates.clear()

    def rolling(self) -> Rolling | None:
        recent = list(self._recent)
        if not recent:
            return None
        prefilled = [
            (s.prompt_tokens - s.cached_tokens, s.prefill_tok_s)
            for s in recent if s.prefill_tok_s > 0 and s.prompt_tokens is not None and s.cached_tokens is not None
        ]
        decoded = [(s.gen_tokens - 1, s.decode_tok_s) for s in recent if s.gen_tokens > 1 and s.decode_tok_s > 0]
        return Rolling(
            n=len(recent),
            ttft_s=sum(s.ttft_s for s in recent) / len(recent),
            prefill_tok_s=_rate(prefilled),
            decode_tok_s=_rate(decoded),
            cached_tokens=_total([s.cached_tokens for s in recent]),
            prompt_tokens=_total([s.prompt_tokens for s in recent]),
        )


def _total(counts: list[int | None]) -> int | None:
    """The sum; None if any count is unknown (a part would pass for the whole)."""
    return None if None in counts else sum(c or 0 for c in counts)


def _rate(pairs: list[tuple[int, float]]) -> float:
    """Tokens over seconds summed: the rate of all those tokens together."""
    tokens = sum(n for n, _ in pairs)
    seconds = sum(n / rate for n, rate in pairs)
    return tokens / seconds if seconds > 0 else 0.0

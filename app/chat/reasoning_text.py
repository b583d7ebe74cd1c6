"""What the window says of a reply's reasoning: the header of its block, and a reply copied with it.

No Qt: the chat view shows these, the tests read them.
"""

from __future__ import annotations

from app.services.history.store import Message


def _count(tokens: int) -> str:
    return f"{tokens:,} token" if tokens == 1 else f"{tokens:,} tokens"


def _duration(seconds: float) -> str:
    return "<1 s" if seconds < 1 else f"{seconds:.0f} s"


def reasoning_header(seconds: float | None, tokens: int | None, *, streaming: bool, closed: bool = True) -> str:
    """"Thinking… 3 s · 120 tokens" while the model thinks; "Thought for 12 s · 340 tokens" after,
    with "(cut off)" when the reply ended inside its reasoning. A figure not known is left out."""
    if streaming:
        parts = ["Thinking…" if seconds is None else f"Thinking… {int(seconds)} s"]
    else:
        parts = ["Thought" if seconds is None else f"Thought for {_duration(seconds)}"]
    if tokens:
        parts.append(_count(tokens))
    header = " · ".join(parts)
    return header if closed else f"{header} (cut off)"


def reasoning_figures(stats: dict | None) -> tuple[float | None, int | None]:
    """(seconds, tokens) of a finished reply's reasoning, from its stats; None where they do not say."""
    if not stats:
        return None, None
    seconds, tokens = stats.get("reasoning_s"), stats.get("reasoning_tokens")
    return (float(seconds) if isinstance(seconds, int | float) else None,
            int(tokens) if isinstance(tokens, int) and tokens > 0 else None)


def finished_header(message: Message) -> str:
    """The reasoning header of a finished (or stored) reply."""
    seconds, tokens = reasoning_figures(message.stats)
    return reasoning_header(seconds, tokens, streaming=False, closed=message.reasoning_closed)


def copy_text(message: Message, with_reasoning: bool = False) -> str:
    """A message as the clipboard gets it: the answer alone, or its reasoning first when asked."""
    if not with_reasoning or not message.reasoning:
        return message.content
    cut = " (cut off)" if not message.reasoning_closed else ""
    return f"Thinking{cut}:\n{message.reasoning.strip()}\n\nAnswer:\n{message.content}"

"""Hold back streamed text that may be the start of a stop string."""

from __future__ import annotations

from collections.abc import Sequence


class StopStringFilter:
    """Feed text pieces in; get back the text that is safe to show.

    Text that could still turn into a stop string is held until it can't; once a stop
    string appears, everything from it on is dropped, `stopped` turns true and `matched` says which.
    """

    def __init__(self, stops: Sequence[str]):
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False
        self.matched: str | None = None  # the stop string that ended the text (the first to appear)

    def feed(self, piece: str) -> str:
        """The part of `held + piece` that can be shown now."""
        if self.stopped:
            return ""
        text = self._held + piece
        if not self._stops:
            return text
        found = [(i, stop) for stop in self._stops if (i := text.find(stop)) >= 0]
        if found:
            cut, self.matched = min(found, key=lambda f: f[0])
            self.stopped = True
            self._held = ""
            return text[:cut]
        keep = self._longest_stop_prefix_suffix(text)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The held text, when generation ends without a stop string."""
        text, self._held = self._held, ""
        return "" if self.stopped else text

    def _longest_stop_prefix_suffix(self, text: str) -> int:
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best

"""When the GGUF backend drafts, and how many: a cost model measured on the reply itself.

A step that verifies drafts decodes a batch: on a GPU it costs about what one token does, on a
CPU several times more (measured on 2 cores with the starter model: 1 token 6 ms, 2 tokens 14 ms,
3 tokens 18 ms, 9 tokens 31 ms: from 2 tokens on, about the root of the batch size). Drafts pay only when enough of them are kept. So the policy times every step
by its batch size and keeps a running share of drafts the model kept, separately after a step
that kept all its drafts and after one that did not (the conversation is copied in runs: a run
goes on, a miss is followed by misses). Each step it takes the draft length that makes the most
tokens per second by those figures, or none when plain decoding is faster.

"lookup" and "draft" always draft (a short draft where a long one does not pay); "auto" drafts
only where it pays, and tries a short draft again after EXPLORE_EVERY plain steps, as a
conversation may start to repeat; each try that keeps nothing doubles the wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_DRAFT_TOKENS = 8  # drafts per step at most: llama.cpp's lookup decoding verifies about as many
EXPLORE_EVERY = 16  # plain steps after which auto tries a short draft again
EXPLORE_DRAFT = 1
DECAY = 0.8  # weight of the past in the running figures, per step
# Before anything is measured: a batch costs a quarter more per extra token; drafts are kept at 2 in 3.
BATCH_PRIOR = 0.25
KEPT_PRIOR = (2.0, 1.0)  # (kept, refuted) counts


@dataclass(slots=True)
class _Share:
    """A running share of drafts kept: geometric, each draft kept until the first one refuted."""

    kept: float = KEPT_PRIOR[0]
    refuted: float = KEPT_PRIOR[1]

    @property
    def p(self) -> float:
        return self.kept / (self.kept + self.refuted)

    def add(self, kept: int, refuted: bool) -> None:
        self.kept = DECAY * self.kept + kept
        self.refuted = DECAY * self.refuted + refuted


@dataclass(slots=True)
class DraftPolicy:
    """How many drafts to verify at the next step.

    Args:
        mode: "off", "lookup", "draft" or "auto".
        max_draft: drafts per step at most.
    """

    mode: str
    max_draft: int = DEFAULT_DRAFT_TOKENS
    drafted: int = 0
    accepted: int = 0
    _cost: dict[int, float] = field(default_factory=dict)  # batch size -> running seconds of a step
    _after_full: _Share = field(default_factory=_Share)  # the share after a step that kept all its drafts
    _after_miss: _Share = field(default_factory=_Share)  # … after one that did not (or a plain one)
    _last_full: bool = False
    _plain_run: int = 0
    _explore_after: int = EXPLORE_EVERY
    _exploring: bool = False

    @property
    def active(self) -> bool:
        return self.mode in ("lookup", "draft", "auto") and self.max_draft > 0

    @property
    def acceptance(self) -> float | None:
        """Share of the drafted tokens the model accepted; None when nothing was drafted."""
        return self.accepted / self.drafted if self.drafted else None

    def limit(self, room: int) -> int:
        """Drafts to ask for at the next step, `room` at most (what the context and max tokens leave)."""
        if not self.active or room <= 0:
            return 0
        best = self._best_length(min(self.max_draft, room))
        if self.mode != "auto":  # always drafts: as long as pays, else a short draft
            return best or min(EXPLORE_DRAFT, room)
        self._exploring = best == 0 and self._plain_run >= self._explore_after
        return min(EXPLORE_DRAFT, room) if self._exploring else best

    def record(self, drafted: int, accepted: int, seconds: float) -> None:
        """One step: `drafted` drafts verified, `accepted` of them kept, in `seconds` (drafting included)."""
        n = drafted + 1
        old = self._cost.get(n)
        self._cost[n] = seconds if old is None else DECAY * old + (1 - DECAY) * seconds
        if drafted == 0:
            self._plain_run += 1
            return
        self._plain_run = 0
        if self._exploring:  # a try that kept nothing: wait twice as long for the next
            self._explore_after = EXPLORE_EVERY if accepted else self._explore_after * 2
        self.drafted += drafted
        self.accepted += accepted
        full = accepted == drafted
        (self._after_full if self._last_full else self._after_miss).add(accepted, not full)
        self._last_full = full

    def _best_length(self, most: int) -> int:
        """The draft length with the most tokens per second by the running figures; 0: plain is faster."""
        plain = self._step_cost(1)
        p = (self._after_full if self._last_full else self._after_miss).p
        best, best_rate = 0, 1.0 / plain
        for k in range(1, most + 1):
            tokens = (1 - p ** (k + 1)) / (1 - p) if p < 1 else k + 1.0  # kept drafts and the token after them
            rate = tokens / self._step_cost(k + 1)
            if rate > best_rate:
                best, best_rate = k, rate
        return best

    def _step_cost(self, n: int) -> float:
        if n in self._cost:
            return self._cost[n]
        plain = self._cost.get(1, 1.0)
        known = [(m, c) for m, c in self._cost.items() if m > 1]
        if known:  # scaled from the nearest measured batch: a batch's cost grows as the root of its size
            m, c = min(known, key=lambda mc: abs(mc[0] - n))
            return c * (n / m) ** 0.5
        return plain * (1 + BATCH_PRIOR * (n - 1))

"""When the GGUF backend drafts, and how many: a cost model measured on the model's own steps.

A step that verifies drafts decodes a batch: on a GPU it costs about what one token does, on a
CPU several times more (measured on 2 cores with the starter model: 1 token 6 ms, 3 tokens 20 ms,
11 tokens 50 ms, 65 tokens 245 ms). Drafts pay only when enough of them are kept. So the policy
times every step by its batch size (the loaded model's figures, kept across its replies) and keeps
a running share of drafts the reply kept, separately after a step that kept all its drafts and
after one that did not (the conversation is copied in runs: a run goes on, a miss is followed by
misses). Each step it takes the draft length that makes the most tokens per second by those
figures, or none when plain decoding is faster.

A passage being copied (the conversation's tail agrees with an earlier passage over LONG_MATCH tokens
or more: a text rewritten, a file edited, a reply asked again) is another matter: its drafts are kept
whole until the copy ends, not each with some chance. Such steps draft up to LONG_DRAFT_TOKENS (and no
more than the match's length), by the share of their drafts the reply kept in such steps: a batch of 65
rows costs a fraction of 65 steps, so long drafts pay once most are kept. llama-server's fastest n-gram type here,
ngram-mod, likewise drafts 48 to 64 tokens after a 24-token match.

"lookup" and "draft" always draft (a short draft where a long one does not pay); "auto" drafts
only where it pays, and tries a short draft again after EXPLORE_EVERY plain steps, as a
conversation may start to repeat; each try that keeps nothing doubles the wait.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.gguf.prompt_lookup import COPY_NGRAM

DEFAULT_DRAFT_TOKENS = 8  # drafts per step at most: llama.cpp's lookup decoding verifies about as many
LONG_MATCH = COPY_NGRAM  # tokens of the tail that agree with an earlier passage: it is being copied
LONG_DRAFT_TOKENS = 64  # drafts per step at most while a passage is copied
EXPLORE_EVERY = 16  # plain steps after which auto tries a short draft again
EXPLORE_DRAFT = 1
DECAY = 0.8  # weight of the past in the running figures, per step
# Before anything is measured: a batch costs a quarter more per extra token; drafts are kept at 2 in 3,
# and three quarters of a copied passage's drafts.
BATCH_PRIOR = 0.25
KEPT_PRIOR = (2.0, 1.0)  # (kept, refuted) counts
COPY_KEPT_PRIOR = 0.75


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
class StepFigures:
    """What one loaded model's steps cost, learned over its replies (the backend keeps one per load), so a
    reply starts from what the last ones measured."""

    cost: dict[int, float] = field(default_factory=dict)  # batch size -> running seconds of a step

    def step_cost(self, n: int) -> float:
        """Seconds of a step of `n` rows: measured, else on the line between the measured batch sizes around
        it (past 2 rows a row costs about the same at any size on a CPU: 3.7 ms at 3 rows and at 65 here),
        else scaled from the nearest measured one as the root of the size: hopeful, so a longer draft than any
        so far is tried, and measured (a GPU's batches cost about what a token does; a CPU's first rows cost
        more than the next: extended as a line, 2 and 3 rows priced 65 at 440 ms where it takes 245, and
        a copy never drafted more than one token), else a quarter of a step more per row."""
        if n in self.cost:
            return self.cost[n]
        batches = sorted((m, c) for m, c in self.cost.items() if m > 1)
        if not batches:
            return self.cost.get(1, 1.0) * (1 + BATCH_PRIOR * (n - 1))
        below = [(m, c) for m, c in batches if m < n]
        above = [(m, c) for m, c in batches if m > n]
        if below and above:
            (m0, c0), (m1, c1) = below[-1], above[0]
            return c0 + (c1 - c0) * (n - m0) / (m1 - m0)
        m, c = below[-1] if below else above[0]
        return c * (n / m) ** 0.5


@dataclass(slots=True)
class DraftPolicy:
    """How many drafts to verify at the next step.

    Args:
        mode: "off", "lookup", "draft" or "auto".
        max_draft: drafts per step at most.
        max_copy: drafts per step at most while a passage is copied.
        figures: the loaded model's (a fresh one: nothing measured yet).
    """

    mode: str
    max_draft: int = DEFAULT_DRAFT_TOKENS
    max_copy: int = LONG_DRAFT_TOKENS
    figures: StepFigures = field(default_factory=StepFigures)
    drafted: int = 0
    accepted: int = 0
    _after_full: _Share = field(default_factory=_Share)  # the share after a step that kept all its drafts
    _after_miss: _Share = field(default_factory=_Share)  # … after one that did not (or a plain one)
    _copy_kept: float = COPY_KEPT_PRIOR  # running share of the drafts kept in a step that copied a passage
    _copied: bool = False  # the step being measured drafted from a passage being copied
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

    def limit(self, room: int, match: int = 0) -> int:
        """Drafts to ask for at the next step, `room` at most (what the context and max tokens leave);
        `match`: how many tokens of the conversation's tail agree with the passage the drafts follow."""
        self._copied = self._exploring = False
        if not self.active or room <= 0:
            return 0
        # A copy drafts no further than it has agreed so far: a passage that matched 12 tokens and then parts
        # costs one batch of 13 rows, not 65 (a similar story asked again: 13 of 64 drafts kept, measured).
        if match >= LONG_MATCH and (best := self._best_copy(min(self.max_copy, room, match))):
            self._copied = True
            return best
        best = self._best_length(min(self.max_draft, room))
        if self.mode != "auto":  # always drafts: as long as pays, else a short draft
            return best or min(EXPLORE_DRAFT, room)
        self._exploring = best == 0 and self._plain_run >= self._explore_after
        return min(EXPLORE_DRAFT, room) if self._exploring else best

    def record(self, drafted: int, accepted: int, seconds: float) -> None:
        """One step: `drafted` drafts verified, `accepted` of them kept, in `seconds` (drafting included)."""
        n, figures = drafted + 1, self.figures
        old = figures.cost.get(n)
        figures.cost[n] = seconds if old is None else DECAY * old + (1 - DECAY) * seconds
        if drafted == 0:
            self._plain_run += 1
            return
        self._plain_run = 0
        if self._exploring:  # a try that kept nothing: wait twice as long for the next
            self._explore_after = EXPLORE_EVERY if accepted else self._explore_after * 2
        self.last(drafted, accepted)
        full = accepted == drafted
        if self._copied:
            self._copy_kept = DECAY * self._copy_kept + (1 - DECAY) * accepted / drafted
        else:
            (self._after_full if self._last_full else self._after_miss).add(accepted, not full)
        self._last_full = full

    def last(self, drafted: int, accepted: int) -> None:
        """The drafts of a step counted in the reply's acceptance (record's part for the step that ends the
        reply, whose time is no step's and whose drafts past the end say nothing of the model)."""
        self.drafted += drafted
        self.accepted += accepted

    def _best_length(self, most: int) -> int:
        """The draft length with the most tokens per second by the running figures, each draft kept with the
        running share until one is refused; 0: plain is faster."""
        p = (self._after_full if self._last_full else self._after_miss).p
        # Kept drafts and the token after them.
        return self._fastest(most, lambda k: (1 - p ** (k + 1)) / (1 - p) if p < 1 else k + 1.0)

    def _best_copy(self, most: int) -> int:
        """… for a passage being copied: the share of its drafts kept in such steps, of any length (a copy
        goes on until it ends, wherever that falls in the draft); 0: plain is faster."""
        kept = self._copy_kept
        return self._fastest(most, lambda k: 1 + kept * k)

    def _fastest(self, most: int, tokens: Callable[[int], float]) -> int:
        """The draft length up to `most` whose step makes the most tokens per second, a step of k drafts making
        `tokens(k)`; 0 where a plain step is fastest."""
        cost = self.figures.step_cost
        best, best_rate = 0, 1.0 / cost(1)
        for k in range(1, most + 1):
            rate = tokens(k) / cost(k + 1)
            if rate > best_rate:
                best, best_rate = k, rate
        return best
